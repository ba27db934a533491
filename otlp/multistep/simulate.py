"""Monte Carlo speculative decoding with every multi-step method, for models too large to
enumerate.

Each target call drafts K paths of L tokens from the draft model, verifies them with the
method from on-path values only (exactly as a decoder would: the kernels of
:mod:`otlp.multistep.single_path`, GBV's tree ranking and skewed draft, or tree traversal),
and appends the output to the context. Block efficiency is tokens per call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from otlp.args import as_generator, integers, positive_int
from otlp.multistep import hsd, single_path
from otlp.multistep.exact import check_method
from otlp.multistep.gbv import path_rank_keys, skewed_conditionals, tree_order
from otlp.multistep.models import Model
from otlp.multistep.spectr import draw, sample_traversal
from otlp.multistep.verifiers import SingleStepVerifier, get_verifier
from otlp.solvers.arrays import FloatArray, IntArray


@dataclass(frozen=True)
class SimulationResult:
    """Per-call accepted counts of a decoding run."""

    method: str
    paths: int
    gamma: int
    accepted: IntArray

    @property
    def calls(self) -> int:
        return int(self.accepted.shape[0])

    @property
    def expected_accepted(self) -> float:
        return float(self.accepted.mean())

    @property
    def block_efficiency(self) -> float:
        """Tokens per target call."""
        return self.expected_accepted + 1.0

    @property
    def stderr(self) -> float:
        """Standard error of the block-efficiency estimate."""
        return float(self.accepted.std(ddof=1) / np.sqrt(self.calls)) if self.calls > 1 else 0.0


class _Laws:
    """A model's laws after prefixes of one call, each computed once."""

    def __init__(self, model: Model, context: tuple[int, ...]) -> None:
        self.model, self.context = model, context
        self.cache: dict[tuple[int, ...], FloatArray] = {}

    def __call__(self, prefix: tuple[int, ...]) -> FloatArray:
        if prefix not in self.cache:
            self.cache[prefix] = np.asarray(self.model(self.context + prefix), dtype=np.float64)
        return self.cache[prefix]

    def along(self, tokens: IntArray, positions: int) -> FloatArray:
        """Laws after the first 0..positions-1 tokens of each path: ``(K, positions, V)``."""
        return np.array(
            [[self(tuple(path[:d].tolist())) for d in range(positions)] for path in tokens]
        )


def simulate(
    target: Model,
    draft: Model,
    gamma: int,
    method: str,
    paths: int = 1,
    *,
    calls: int = 1000,
    seed: int = 0,
    context: Sequence[int] = (),
    restart: bool = False,
    ranking: str = "ratio",
    rule: str | SingleStepVerifier = "ot",
    **rule_options: Any,
) -> SimulationResult:
    """Decode ``calls`` target calls with ``method``; ``restart`` starts every call from
    ``context`` (i.i.d. calls, comparable with :func:`expected_accepted`), otherwise the
    outputs accumulate as in real decoding."""
    check_method(gamma, method, paths)
    for name, model in (("target", target), ("draft", draft)):
        if not callable(model):
            raise ValueError(f"{name}: expected a model (prefix -> probabilities), got {model!r}")
    calls = positive_int("calls", calls)
    verifier = get_verifier(rule, **rule_options) if method == "spectr" else None
    rng = as_generator(positive_int("seed", seed, minimum=0), "seed")
    start = integers("context", context)
    sequence = list(start)
    accepted = np.empty(calls, dtype=np.int64)
    for call in range(calls):
        ctx = start if restart else tuple(sequence)
        tgt, dft = _Laws(target, ctx), _Laws(draft, ctx)
        drafts = _draft_paths(dft, gamma, paths, rng)
        if verifier is not None:  # method == "spectr"
            out = sample_traversal(tgt, dft, drafts, verifier, rng)
        else:
            out = _verify_single(tgt, dft, drafts, method, ranking, rng)
        accepted[call] = len(out) - 1
        sequence.extend(out)
    return SimulationResult(method, paths, gamma, accepted)


def _draft_paths(draft: _Laws, gamma: int, paths: int, rng: np.random.Generator) -> IntArray:
    tokens = np.empty((paths, gamma), dtype=np.int64)
    for k in range(paths):
        for d in range(gamma):
            tokens[k, d] = draw(rng, draft(tuple(tokens[k, :d].tolist())))
    return tokens


def _verify_single(
    target: _Laws,
    draft: _Laws,
    drafts: IntArray,
    method: str,
    ranking: str,
    rng: np.random.Generator,
) -> list[int]:
    """Token-wise / block verification of one path; GBV first selects the path ([GBV] §5)."""
    paths, gamma = drafts.shape
    tgt = target.along(drafts, gamma + 1)
    dft = draft.along(drafts, gamma)
    if method == "gbv":
        chosen = tree_order(path_rank_keys(tgt, dft, drafts, ranking))[-1:]
        tgt, drafts = tgt[chosen], drafts[chosen]
        dft, _ = skewed_conditionals(tgt, dft[chosen], drafts, paths, ranking)
    if method == "hsd":  # drawn as a decoder runs it: the joint test, then walking back
        return hsd.sample(tgt[0], dft[0], drafts[0], rng)
    kernel = single_path.tokenwise if method == "token" else single_path.block
    stops = kernel(tgt, dft, drafts)
    tau = draw(rng, stops.stop[0])
    return [*drafts[0, :tau].tolist(), draw(rng, stops.correction[0, tau])]
