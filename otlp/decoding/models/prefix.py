"""Any function of whole prefixes as a tree model: the toy models and memoised real ones.

:class:`PrefixLM` wraps a callable that maps a batch of equal-length prefixes ``(m, d)`` to
next-token laws ``(m, V)`` — an :class:`otlp.multistep.models.AutoregressiveModel` (its
``batch`` method), or any function — and answers a session's tree queries by evaluating the
full context of every node (no cache: each call recomputes from the prefix). Prefixes of
different lengths in one call are grouped by length.

:class:`Memoized` remembers the law of every prefix it has seen, so that a Monte Carlo test
that revisits the same few contexts 10^5 times (the losslessness checks) evaluates each once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike

from otlp.args import positive_int
from otlp.decoding.models.base import check_temperature, tempered
from otlp.solvers.arrays import FloatArray, IntArray

PrefixFunction = Callable[[IntArray], ArrayLike]


class Memoized:
    """``fn`` with a dictionary from prefix (a tuple of ids) to its law."""

    def __init__(self, fn: PrefixFunction) -> None:
        self.fn = fn
        self.laws: dict[tuple[int, ...], FloatArray] = {}

    def __call__(self, prefixes: IntArray) -> FloatArray:
        keys = [tuple(int(t) for t in row) for row in np.asarray(prefixes, dtype=np.int64)]
        missing = list(dict.fromkeys(k for k in keys if k not in self.laws))
        if missing:
            laws = np.asarray(self.fn(np.array(missing, dtype=np.int64)), dtype=np.float64)
            for key, law in zip(missing, laws, strict=True):
                self.laws[key] = law
        return np.stack([self.laws[k] for k in keys])


class PrefixLM:
    """A tree model from a function of prefixes (see the module docstring)."""

    def __init__(
        self,
        fn: PrefixFunction | object,
        *,
        vocab_size: int | None = None,
        temperature: float = 1.0,
        name: str | None = None,
    ) -> None:
        batch = getattr(fn, "batch", None)
        call = batch if callable(batch) else fn
        if not callable(call):
            raise ValueError("fn: expected a callable of prefixes or a model with .batch")
        size = vocab_size if vocab_size is not None else getattr(fn, "vocab_size", None)
        if size is None:
            raise ValueError("vocab_size: required when fn has no vocab_size attribute")
        self.fn: PrefixFunction = call
        self.vocab_size = positive_int("vocab_size", size)
        self.temperature = check_temperature(temperature)
        self.name = name if name is not None else type(fn).__name__

    def laws(self, prefixes: Sequence[Sequence[int]]) -> FloatArray:
        """Tempered laws after each prefix (any lengths), ``(len(prefixes), V)``."""
        out = np.empty((len(prefixes), self.vocab_size), dtype=np.float64)
        by_length: dict[int, list[int]] = {}
        for i, prefix in enumerate(prefixes):
            by_length.setdefault(len(prefix), []).append(i)
        for length, index in by_length.items():
            block = np.array([prefixes[i] for i in index], dtype=np.int64).reshape(
                len(index), length
            )
            laws = np.asarray(self.fn(block), dtype=np.float64)
            if laws.shape != (len(index), self.vocab_size):
                raise ValueError(
                    f"fn: returned shape {laws.shape} for {len(index)} prefixes, "
                    f"expected {(len(index), self.vocab_size)}"
                )
            out[index] = tempered(laws, self.temperature)
        return out

    def session(self, prompts: Sequence[Sequence[int]]) -> PrefixSession:
        return PrefixSession(self, prompts)

    def __repr__(self) -> str:
        return f"PrefixLM({self.name}, V={self.vocab_size}, T={self.temperature:g})"


class PrefixSession:
    """Committed contexts of B rows; every law is recomputed from its full prefix."""

    def __init__(self, model: PrefixLM, prompts: Sequence[Sequence[int]]) -> None:
        self.model = model
        self.contexts = [[int(t) for t in prompt] for prompt in prompts]
        self._parents: list[int] = []
        self._tokens: list[list[int]] = [[] for _ in self.contexts]
        self._roots: dict[int, FloatArray] = {}

    def _node_context(self, row: int, node: int) -> list[int]:
        path: list[int] = []
        while node >= 0:
            path.append(max(self._tokens[row][node], 0))  # an absent node's law is unused
            node = self._parents[node]
        return self.contexts[row] + path[::-1]

    def forward(self, tokens: IntArray, parents: IntArray, rows: IntArray) -> FloatArray:
        tokens = np.asarray(tokens, dtype=np.int64).reshape(len(rows), len(parents))
        first = len(self._parents)
        self._parents.extend(int(p) for p in parents)
        prefixes: list[list[int]] = []
        for r, row in enumerate(rows):
            self._tokens[row].extend(int(t) for t in tokens[r])
            if row not in self._roots:
                prefixes.append(self.contexts[row])
            prefixes.extend(self._node_context(row, first + j) for j in range(tokens.shape[1]))
        laws = self.model.laws(prefixes)
        out = np.empty((len(rows), 1 + tokens.shape[1], self.model.vocab_size))
        at = 0
        for r, row in enumerate(rows):
            if row not in self._roots:
                self._roots[row] = laws[at]
                at += 1
            out[r, 0] = self._roots[row]
            out[r, 1:] = laws[at : at + tokens.shape[1]]
            at += tokens.shape[1]
        return out

    def commit(
        self, rows: IntArray, tokens: Sequence[Sequence[int]], nodes: Sequence[Sequence[int]]
    ) -> None:
        for r, row in enumerate(rows):
            self.contexts[row].extend(int(t) for t in tokens[r])
            self._roots.pop(row, None)
        self._parents = []
        self._tokens = [[] for _ in self.contexts]

    def context(self, row: int) -> list[int]:
        return list(self.contexts[row])
