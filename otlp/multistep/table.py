"""Exact tabulation of a model's next-token laws on every prefix up to a depth.

Prefixes of length d are indexed lexicographically in base V (:func:`prefix_index`), so the
children of prefix ``u`` are ``u * V + y`` and the prefixes extending ``u`` by ``m`` tokens
form the contiguous block ``[u * V**m, (u + 1) * V**m)``. Everything exact in
:mod:`otlp.multistep` is vectorised over these level arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from otlp.args import integers, positive_int
from otlp.limits import check_size, power
from otlp.multistep.models import AutoregressiveModel, Model, prefix_digits, prefix_index
from otlp.solvers.arrays import FloatArray, IntArray

SUM_TOL = 1e-8


@dataclass(frozen=True)
class PrefixTable:
    """``conditionals[d]`` (shape ``(V**d, V)``): the next-token law after each length-d prefix."""

    conditionals: tuple[FloatArray, ...]
    _joints: list[FloatArray] = field(default_factory=list, repr=False, compare=False)

    @property
    def vocab_size(self) -> int:
        return int(self.conditionals[0].shape[1])

    @property
    def depth(self) -> int:
        """Number of tabulated positions: laws exist after prefixes of length < depth."""
        return len(self.conditionals)

    def joint(self, length: int) -> FloatArray:
        """Probability of each length-``length`` prefix (shape ``(V**length,)``)."""
        if not self._joints:
            self._joints.append(np.ones(1))
        while len(self._joints) <= length:
            d = len(self._joints) - 1
            self._joints.append((self._joints[d][:, None] * self.conditionals[d]).ravel())
        return self._joints[length]

    def along_paths(self, paths: IntArray, positions: int) -> FloatArray:
        """Laws after the first ``0..positions-1`` tokens of each path: ``(P, positions, V)``."""
        vocab = self.vocab_size
        out = np.empty((paths.shape[0], positions, vocab))
        for d in range(positions):
            out[:, d] = self.conditionals[d][prefix_index(paths[:, :d], vocab)]
        return out

    def extend(self, mass: FloatArray, length: int, to_length: int) -> FloatArray:
        """Push a measure on length-``length`` prefixes forward to ``to_length`` with the model."""
        for d in range(length, to_length):
            mass = (mass[:, None] * self.conditionals[d]).ravel()
        return mass


def tabulate(
    model: Model | PrefixTable,
    depth: int,
    *,
    context: Sequence[int] = (),
    name: str = "model",
) -> PrefixTable:
    """Tabulate ``model`` after every prefix of length < ``depth`` (prefixes follow ``context``).

    ``model`` is an :class:`AutoregressiveModel` (tabulated level by level in one batch call)
    or any callable prefix -> probability vector (called once per prefix). Each returned law
    is checked; a bad one is a ``ValueError`` naming ``name``.
    """
    depth = positive_int("depth", depth)
    context = integers("context", context)
    if isinstance(model, PrefixTable):
        if model.depth < depth:
            raise ValueError(f"{name}: table has depth {model.depth} < {depth}")
        return PrefixTable(model.conditionals[:depth])
    if not callable(model):
        raise ValueError(f"{name}: expected a callable prefix -> probabilities, got {model!r}")
    ctx = np.asarray(tuple(context), dtype=np.int64)
    first = _law(name, np.zeros((1, 0), dtype=np.int64), model(tuple(ctx.tolist())), None)
    vocab = first.shape[1]
    check_size(
        f"{name} prefix table",
        power(vocab, depth) * vocab,
        advice="lower the draft length or the vocabulary",
    )
    levels = [first]
    for d in range(1, depth):
        tokens = prefix_digits(np.arange(vocab**d), vocab, d)
        prefixes = np.hstack([np.broadcast_to(ctx, (tokens.shape[0], ctx.shape[0])), tokens])
        if isinstance(model, AutoregressiveModel):
            rows = np.asarray(model.batch(prefixes), dtype=np.float64)
        else:
            rows = np.array([model(tuple(row.tolist())) for row in prefixes], dtype=np.float64)
        levels.append(_law(name, tokens, rows, vocab))
    return PrefixTable(tuple(levels))


def _law(name: str, prefixes: IntArray, rows: object, vocab: int | None) -> FloatArray:
    """Check and renormalise next-token laws (one row per prefix in ``prefixes``)."""
    arr = np.atleast_2d(np.array(rows, dtype=np.float64))
    expected = arr.shape[-1] if vocab is None else vocab
    if arr.ndim != 2 or arr.shape != (prefixes.shape[0], expected):
        raise ValueError(f"{name}: next-token laws must be vectors of length V = {expected}")
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(arr).all(1) | (arr < 0).any(1) | (np.abs(arr.sum(1) - 1) > SUM_TOL)
    if bad.any():
        where = tuple(prefixes[np.argmax(bad)].tolist())
        raise ValueError(f"{name}: next-token law after prefix {where} is not a probability vector")
    arr = arr / arr.sum(axis=1, keepdims=True)
    arr.setflags(write=False)
    return arr


def check_table(name: str, table: object) -> PrefixTable:
    """``table`` if it is a :class:`PrefixTable`, else a ``ValueError`` naming ``name``."""
    if not isinstance(table, PrefixTable):
        raise ValueError(f"{name}: expected a PrefixTable (see tabulate), got {table!r}")
    return table
