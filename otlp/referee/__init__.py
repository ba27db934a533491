"""The referee for speculative samplers: is a sampler's output law the target's, where does
it fail (a minimal reproducer), and how far is its acceptance from the optimum α*?

>>> import numpy as np
>>> from otlp.referee import referee
>>> def draw_from_target(p, q, drafts, rng):
...     return int(rng.choice(p.shape[0], p=p))
>>> referee(draw_from_target, cases=5).lossless
True

:func:`referee` returns a :class:`Verdict` (status ``lossless``, ``deviation`` or ``error``);
:func:`assert_lossless` fails a test with the reproducer; :func:`replay` re-runs a reproducer
file; :mod:`otlp.referee.adapters` wraps otlp's own rules in the protocols. A sampler raises
:class:`NotEnumerable` to tell the exact mode it cannot be followed (the referee then judges
it statistically); :class:`SamplerTimeout` is what a call past the time limit is stopped
with. Engines' own layouts (vLLM / FlashInfer chains, EAGLE / Medusa paths, SGLang trees,
transformers' candidate logits) are protocols too (:mod:`otlp.referee.layouts`), and a sampler
may take a torch or Python generator instead of numpy's (:mod:`otlp.referee.generators`).
The method and its guarantees: docs/referee.md.
"""

from otlp.referee.clock import SamplerTimeout
from otlp.referee.judge import (
    Finding,
    GapRow,
    Verdict,
    assert_lossless,
    load_sampler,
    referee,
    replay,
    write_reproducer,
)
from otlp.referee.symbolic import NotEnumerable

__all__ = [
    "Finding",
    "GapRow",
    "NotEnumerable",
    "SamplerTimeout",
    "Verdict",
    "assert_lossless",
    "load_sampler",
    "referee",
    "replay",
    "write_reproducer",
]
