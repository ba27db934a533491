"""The random generator a sampler asks for, handed to it by the referee.

Engines do not draw from a ``numpy.random.Generator``: vLLM takes a ``torch.Generator`` per
seeded request, FlashInfer one per call, transformers and EAGLE draw from torch's and Python's
global generators. A sampler declares what it takes (:data:`KINDS`, its ``rng`` attribute,
``referee(..., rng=)`` or ``otlp referee --rng``) and the referee hands it exactly that as the
protocol's last argument:

* ``numpy`` (default) — the referee's ``numpy.random.Generator`` (the exact mode's branching
  stand-in there: the only kind the exact mode can follow);
* ``torch`` — one ``torch.Generator`` (CPU), seeded once per verdict from the referee's seed;
* ``torch-rows`` — a list of one ``torch.Generator`` per row of the call (a batched sampler's
  B rows; vLLM's per-request generators), each seeded once;
* ``torch-global`` — ``None``; the referee seeds torch's global generator (``torch.manual_seed``)
  once per verdict and restores its state afterwards;
* ``python`` — ``None``; the referee seeds Python's ``random`` once per verdict and restores
  its state afterwards.

The exact mode cannot branch torch's or Python's draws: for every kind but ``numpy`` it raises
:class:`~otlp.referee.symbolic.NotEnumerable` on the first call, saying which generator the
sampler takes, and the referee judges it statistically ([GR] §4's lossless criterion, tested by
:mod:`otlp.referee.stats`). Seeding once per verdict, not per call, keeps a draw's cost the
sampler's own (``torch.manual_seed`` costs ~0.25 ms a call here).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from otlp.referee.symbolic import NotEnumerable

KINDS = ("numpy", "torch", "torch-rows", "torch-global", "python")
_SEED_BOUND = 2**63


def checked_kind(kind: object) -> str:
    """``kind`` if it is one of :data:`KINDS`; ValueError naming ``rng`` otherwise (a
    generator object passed where its kind belongs included)."""
    if kind not in KINDS:
        raise ValueError(f"rng: expected one of {', '.join(KINDS)}, got {kind!r}")
    return str(kind)


class Generators:
    """The generators of one kind handed out during one verdict: :meth:`for_call` gives a
    call's generator, seeded once from the referee's ``numpy.random.Generator``."""

    def __init__(self, kind: str) -> None:
        self.kind = checked_kind(kind)
        self._torch: list[Any] = []  # torch generators, seeded once each
        self._seeded = False  # the global generator of torch-global / python

    def for_call(self, rng: Any, rows: int) -> Any:
        """What the sampler gets as ``rng`` for a call of ``rows`` rows (requests), given the
        referee's ``rng``; NotEnumerable under the exact mode for every kind but numpy."""
        if self.kind == "numpy":
            return rng
        if not isinstance(rng, np.random.Generator):
            raise NotEnumerable(
                f"the sampler takes rng={self.kind!r}; the exact mode branches only draws from "
                "the numpy Generator it hands"
            )
        if self.kind in ("torch-global", "python"):
            if not self._seeded:
                seed = int(rng.integers(_SEED_BOUND))
                if self.kind == "python":
                    random.seed(seed)
                else:
                    import torch

                    torch.manual_seed(seed)
                self._seeded = True
            return None
        wanted = rows if self.kind == "torch-rows" else 1
        if len(self._torch) < wanted:
            import torch

            for _ in range(wanted - len(self._torch)):
                gen = torch.Generator()
                gen.manual_seed(int(rng.integers(_SEED_BOUND)))
                self._torch.append(gen)
        return self._torch[:rows] if self.kind == "torch-rows" else self._torch[0]


class HandedGenerator:
    """A position or tree sampler called with its :class:`Generators`' generator in place of
    the referee's ``rng`` (the last positional argument); the sampler's attributes pass
    through. A call's rows are its first argument's leading dimension when that argument is
    2-D (a batch), else 1."""

    def __init__(self, sampler: Callable[..., Any], generators: Generators) -> None:
        self.sampler, self.generators = sampler, generators

    def __getattr__(self, name: str) -> Any:
        if name == "sampler":  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.sampler, name)

    def __call__(self, *args: Any) -> Any:
        *head, rng = args
        shape: tuple[int, ...] = tuple(getattr(head[0], "shape", ())) if head else ()
        rows = int(shape[0]) if len(shape) > 1 else 1
        return self.sampler(*head, self.generators.for_call(rng, rows))


def hand(sampler: Callable[..., Any], generators: Generators) -> Callable[..., Any]:
    """A position or tree ``sampler`` with ``generators``' generator handed to it
    (:class:`HandedGenerator`; the sampler itself for ``numpy``)."""
    return sampler if generators.kind == "numpy" else HandedGenerator(sampler, generators)


@contextmanager
def one_verdict(kind: str) -> Iterator[Generators]:
    """The :class:`Generators` of ``kind`` for one verdict; the global generators that the
    referee seeds (Python's ``random``, torch's) get their states back on exit."""
    generators = Generators(kind)
    python_state = random.getstate()
    torch_state = None
    if generators.kind == "torch-global":
        import torch

        torch_state = torch.random.get_rng_state()
    try:
        yield generators
    finally:
        random.setstate(python_state)
        if torch_state is not None:
            import torch

            torch.random.set_rng_state(torch_state)
