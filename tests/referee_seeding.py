"""Lossless samplers built from the seeding patterns engines use (issue 35's goal: no false
alarm on samplers whose randomness the referee's exact mode cannot follow), for
``tests/test_referee_seeding.py`` and ``benchmarks/referee_false_alarms.py``.

Every sampler is the same batched single-draft rejection rule (position protocol, one draft:
accept x when ``u1 · q(x) < p(x)``, else the residual ``max(p - q, 0)`` by inverse CDF on
``u2``; p where the residual vanishes): lossless whatever uniforms it is fed, so any flag is a
false alarm. What varies is where its uniforms come from (:data:`SOURCES`), how often the
source is seeded from the referee's integers (every call, only on the first call, every
seventh call), and how many uniforms a call draws (two per row, a variable number of extra
ones, or a residual drawn by rejection: a geometric number). :func:`fuzzed` draws such
patterns at random.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

torch: Any = None  # imported on first use (the module is imported by the benchmark too)


def _torch() -> Any:
    global torch
    if torch is None:
        import torch as imported

        torch = imported
    return torch


Rows = int | np.ndarray  # a number of rows, or the indices of the rows that draw


def _size(rows: Rows) -> int:
    return rows if isinstance(rows, int) else int(rows.shape[0])


class _Source:
    """Where a sampler's uniforms come from: ``seed(rng, rows)`` seeds it from the referee's
    integers (nothing for a handed generator), ``uniforms(count, rows, rng)`` gives float64
    (rows, count), ``tokens(vocab, rows, rng)`` one uniform proposal per row; ``rows`` is a
    number of rows or the indices of the rows that draw (a per-row generator draws for its
    own row)."""

    def seed(self, rng: Any, rows: int) -> None:
        """Nothing to seed."""

    def uniforms(self, count: int, rows: Rows, rng: Any) -> np.ndarray:
        raise NotImplementedError

    def tokens(self, vocab: int, rows: Rows, rng: Any) -> np.ndarray:
        u = self.uniforms(1, rows, rng)[:, 0]
        return np.minimum((u * vocab).astype(np.int64), vocab - 1)


class _TorchGlobal(_Source):
    """torch's global generator, seeded with ``torch.manual_seed(integers(bound))``."""

    def __init__(self, bound: int) -> None:
        self.bound = bound

    def seed(self, rng: Any, rows: int) -> None:
        _torch().manual_seed(int(rng.integers(self.bound)))

    def uniforms(self, count: int, rows: Rows, rng: Any) -> np.ndarray:
        return _torch().rand((_size(rows), count), dtype=_torch().float64).numpy()


class _TorchGenerator(_Source):
    """One private ``torch.Generator``, reseeded from the referee's integers."""

    def __init__(self, bound: int) -> None:
        self.bound, self.gen = bound, None

    def seed(self, rng: Any, rows: int) -> None:
        self.gen = _torch().Generator()
        self.gen.manual_seed(int(rng.integers(self.bound)))

    def uniforms(self, count: int, rows: Rows, rng: Any) -> np.ndarray:
        t = _torch()
        return t.rand((_size(rows), count), generator=self.gen, dtype=t.float64).numpy()


class _TorchRows(_Source):
    """One ``torch.Generator`` per row, seeded from the referee's integers (vLLM's per-request
    generators, rebuilt on every seeding; a row first seen later gets one then)."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.gens: list[Any] = []

    def seed(self, rng: Any, rows: int) -> None:
        self.gens = []
        self._grow(rng, rows)

    def _grow(self, rng: Any, rows: int) -> None:
        for seed in np.atleast_1d(rng.integers(self.bound, size=rows - len(self.gens))):
            gen = _torch().Generator()
            gen.manual_seed(int(seed))
            self.gens.append(gen)

    def uniforms(self, count: int, rows: Rows, rng: Any) -> np.ndarray:
        t = _torch()
        which = np.arange(rows) if isinstance(rows, int) else rows
        if len(self.gens) < which.max(initial=-1) + 1:
            self._grow(rng, int(which.max()) + 1)
        return np.stack(
            [t.rand(count, generator=self.gens[i], dtype=t.float64).numpy() for i in which]
        ).reshape(which.shape[0], count)


class _NumpyLegacy(_Source):
    """numpy's legacy global generator, ``np.random.seed(integers(2**32))``."""

    def __init__(self, bound: int) -> None:
        self.bound = min(bound, 2**32)

    def seed(self, rng: Any, rows: int) -> None:
        np.random.seed(int(rng.integers(self.bound)))  # noqa: NPY002 (the pattern under test)

    def uniforms(self, count: int, rows: Rows, rng: Any) -> np.ndarray:
        return np.random.random_sample((_size(rows), count))  # noqa: NPY002


class _Python(_Source):
    """Python's ``random``, ``random.seed(integers(bound))``."""

    def __init__(self, bound: int) -> None:
        self.bound = bound

    def seed(self, rng: Any, rows: int) -> None:
        random.seed(int(rng.integers(self.bound)))

    def uniforms(self, count: int, rows: Rows, rng: Any) -> np.ndarray:
        return _python_uniforms(count, _size(rows))


def _python_uniforms(count: int, rows: int) -> np.ndarray:
    return np.array([[random.random() for _ in range(count)] for _ in range(rows)]).reshape(
        rows, count
    )


class _Handed(_Source):
    """The generator the referee hands (``rng`` of the sampler's declared kind); ``numpy``: the
    referee's own Generator, which the exact mode follows (its branching stand-in)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def tokens(self, vocab: int, rows: Rows, rng: Any) -> np.ndarray:
        if self.kind == "numpy":  # branched by the exact mode, one branch per token
            return np.asarray(rng.integers(vocab, size=_size(rows)), dtype=np.int64)
        return super().tokens(vocab, rows, rng)

    def uniforms(self, count: int, rows: Rows, rng: Any) -> np.ndarray:
        if self.kind == "numpy":
            return rng.random((_size(rows), count))
        if self.kind == "python":
            return _python_uniforms(count, _size(rows))
        t = _torch()
        if self.kind == "torch-rows":
            which = np.arange(rows) if isinstance(rows, int) else rows
            draws = [t.rand(count, generator=rng[i], dtype=t.float64).numpy() for i in which]
            return np.stack(draws).reshape(which.shape[0], count)
        gen = rng if self.kind == "torch" else None
        return t.rand((_size(rows), count), generator=gen, dtype=t.float64).numpy()


SOURCES: dict[str, tuple[str, Callable[[int], Any]]] = {
    "torch.manual_seed": ("numpy", _TorchGlobal),
    "torch.Generator": ("numpy", _TorchGenerator),
    "torch.Generator per row": ("numpy", _TorchRows),
    "np.random.seed": ("numpy", _NumpyLegacy),
    "random.seed": ("numpy", _Python),
    "handed numpy": ("numpy", lambda _: _Handed("numpy")),
    "handed torch": ("torch", lambda _: _Handed("torch")),
    "handed torch-rows": ("torch-rows", lambda _: _Handed("torch-rows")),
    "handed torch-global": ("torch-global", lambda _: _Handed("torch-global")),
    "handed python": ("python", lambda _: _Handed("python")),
}
SEEDINGS = ("every call", "first call", "every 7th call")
DRAWS = ("two", "variable", "rejection")
BOUNDS = (2**16, 2**31, 2**32, 2**63)  # seeds drawn with rng.integers(bound)


@dataclass(frozen=True)
class Pattern:
    """A seeding pattern: its source, seed bound, seeding frequency and draws per call."""

    source: str
    bound: int = 2**31
    seeding: str = "every call"
    draws: str = "two"

    @property
    def name(self) -> str:
        handed = self.source.startswith("handed")
        bound = "" if handed else f" integers(2**{self.bound.bit_length() - 1})"
        seeding = "" if handed else f", {self.seeding}"
        return f"{self.source}{bound}{seeding}, {self.draws} uniforms"

    def sampler(self) -> Callable[..., Any]:
        """A fresh lossless batched position sampler of this pattern (its own call count)."""
        kind, factory = SOURCES[self.source]
        source = factory(self.bound)
        state = {"calls": 0, "seeded": False}

        def sampler(p: np.ndarray, q: np.ndarray, drafts: np.ndarray, rng: Any) -> np.ndarray:
            rows = p.shape[0]
            state["calls"] += 1
            if (
                self.seeding == "every call"
                or not state["seeded"]
                or (self.seeding == "every 7th call" and state["calls"] % 7 == 0)
            ):
                source.seed(rng, rows)  # may raise NotEnumerable (the exact mode): not seeded
                state["seeded"] = True
            if self.draws == "variable":  # 0..3 extra uniforms per row, discarded
                extra = rng.integers(4) if kind == "numpy" else state["calls"] * 2654435761 % 4
                source.uniforms(int(extra), rows, rng)
            u = source.uniforms(2, rows, rng)
            return _rule(p, q, drafts, u, source if self.draws == "rejection" else None, rng)

        sampler.batched, sampler.max_children, sampler.rng = True, 1, kind
        sampler.__qualname__ = self.name
        return sampler


def _rule(
    p: np.ndarray, q: np.ndarray, drafts: np.ndarray, u: np.ndarray, source: Any, rng: Any
) -> np.ndarray:
    """Single-draft rejection with the residual by inverse CDF on ``u[:, 1]``, or, given a
    ``source``, by rejection from uniform proposals (two fresh uniforms per try)."""
    rows = np.arange(p.shape[0])
    x = drafts[:, 0]
    accept = np.array(u[:, 0] * q[rows, x] < p[rows, x], dtype=bool)
    left = np.maximum(p - q, 0.0)
    left = np.where(left.sum(axis=1, keepdims=True) > 0, left, p)
    left = left / left.sum(axis=1, keepdims=True)
    if source is None:
        cdf = np.cumsum(left, axis=1)
        other = np.minimum((cdf <= u[:, 1:2] * cdf[:, -1:]).sum(axis=1), p.shape[1] - 1)
    else:
        other = np.where(accept, x, -1)  # the rejected rows draw until they accept
        top = left.max(axis=1)
        while np.any(other < 0):  # propose a token uniformly, accept it by left / top
            draw = np.flatnonzero(other < 0)
            token = source.tokens(p.shape[1], draw, rng)
            coin = source.uniforms(1, draw, rng)[:, 0]
            hit = np.array(coin * top[draw] < left[draw, token], dtype=bool)
            other[draw[hit]] = token[hit]
    return np.where(accept, x, other).astype(np.int64)


def fuzzed(count: int, seed: int = 0) -> Iterator[Pattern]:
    """``count`` patterns drawn at random (seeded): a source, a seed bound, a seeding
    frequency and the draws per call."""
    rng = np.random.default_rng([seed, 35])
    names = list(SOURCES)
    for i in range(count):
        source = names[i % len(names)]  # every source in turn, the rest at random
        yield Pattern(
            source,
            BOUNDS[int(rng.integers(len(BOUNDS)))],
            SEEDINGS[int(rng.integers(len(SEEDINGS)))],
            DRAWS[int(rng.integers(len(DRAWS)))],
        )
