"""Draft columns: the right-hand vertices of the OTLP, as sets of distinct tokens or as tuples.

The relaxed OTLP (seed 000, Eq. 2) depends on a drafted n-tuple only through ``set(omega)``,
so every draft scheme can be indexed by sets of distinct tokens, with the mass of a set being
the probability that the drafted tuple has exactly that set. Splitting a set-indexed solution
in proportion to the tuple masses gives an ordered-tuple solution with the same marginals
and acceptance; the conditional pi(. | omega) is the same for all tuples with one set. The
ordered-tuple form (``k**n`` columns) is kept for cross-checks and for seed 001's LP.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import comb

import numpy as np
from numpy.typing import NDArray

from otlp import combinatorics as cb
from otlp.limits import check_size

FORMS = ("sets", "tuples")
FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class DraftColumns:
    """Columns of a problem over the draft vocabulary ``range(k)`` (local token ids).

    ``members[c]`` lists column c's tokens (sets: sorted, padded with -1; tuples: in draw
    order); ``mass[c]`` is its draft probability; ``inc_token``/``inc_col`` list the incidence
    pairs (i, c) with i in set(c), each once.
    """

    form: str
    k: int
    n: int
    members: NDArray[np.int64]
    mass: FloatArray
    inc_token: NDArray[np.int64]
    inc_col: NDArray[np.int64]
    set_sizes: tuple[int, ...] = ()
    _offsets: dict[int, int] = field(default_factory=dict, repr=False)
    _binom: NDArray[np.int64] | None = field(default=None, repr=False)

    @property
    def count(self) -> int:
        """Number of columns."""
        return int(self.mass.shape[0])

    def indices_of(self, local_tuples: NDArray[np.int64]) -> NDArray[np.int64]:
        """Column index of each drafted tuple (rows of local token ids), vectorised."""
        tuples = np.atleast_2d(np.asarray(local_tuples, dtype=np.int64))
        if tuples.shape[1] != self.n:
            raise ValueError(f"omega: expected {self.n} drafted tokens, got {tuples.shape[1]}")
        if tuples.size and (tuples.min() < 0 or tuples.max() >= self.k):
            raise ValueError("omega: contains a token outside the draft vocabulary")
        if self.form == "tuples":
            return cb.tuple_rank(tuples, self.k)
        distinct = np.sort(tuples, axis=1)
        repeated = np.zeros_like(distinct, dtype=bool)
        repeated[:, 1:] = distinct[:, 1:] == distinct[:, :-1]
        distinct[repeated] = self.k  # sentinel sorts after every real token
        distinct.sort(axis=1)
        sizes = self.n - repeated.sum(axis=1)
        unknown = set(np.unique(sizes).tolist()) - set(self.set_sizes)
        if unknown:
            raise ValueError(f"omega: {sorted(unknown)} distinct tokens is impossible here")
        assert self._binom is not None
        ranks = np.zeros(tuples.shape[0], dtype=np.int64)
        for pos in range(self.n):
            real = distinct[:, pos] < self.k
            ranks[real] += self._binom[distinct[real, pos], pos + 1]
        offsets = np.array([self._offsets.get(int(s), 0) for s in range(self.n + 1)])
        return ranks + offsets[sizes]

    def contained_in(self, mask: NDArray[np.bool_]) -> NDArray[np.bool_]:
        """For each column, whether all its tokens lie in the token mask (set(c) ⊆ H)."""
        outside = np.bincount(self.inc_col, weights=~mask[self.inc_token], minlength=self.count)
        return outside == 0


def column_count(form: str, k: int, n: int, sizes: range) -> tuple[int, int]:
    """(columns, incidence pairs) a column set would have, computed without allocating."""
    if form == "tuples":
        return k**n, k**n * min(n, k)
    return cb.count_sets(k, sizes), sum(j * comb(k, j) for j in sizes)


def build_columns(form: str, draft_rows: FloatArray, n: int, scheme: str) -> DraftColumns:
    """Enumerate columns and their masses for a draft scheme over ``k`` local tokens.

    ``draft_rows`` is ``(n, k)``: the distribution of each draw (i.i.d.: equal rows). For
    sampling without replacement ``draft_rows[0]`` is the base distribution.
    """
    if form not in FORMS:
        raise ValueError(f"form: expected one of {FORMS}, got {form!r}")
    k = draft_rows.shape[1]
    sizes = range(n, n + 1) if scheme == "without_replacement" else range(1, min(n, k) + 1)
    _, pairs = column_count(form, k, n, sizes)
    check_size(f"draft columns ({form}, k={k}, n={n})", pairs)
    if form == "tuples":
        return _tuple_columns(draft_rows, n, scheme)
    return _set_columns(draft_rows, n, scheme, sizes)


def _set_columns(draft_rows: FloatArray, n: int, scheme: str, sizes: range) -> DraftColumns:
    k = draft_rows.shape[1]
    binom = cb.binomial_table(k, n)
    blocks, masses, offsets = [], [], {}
    start = 0
    for j in sizes:
        subsets = cb.colex_subsets(k, j)
        offsets[j] = start
        start += subsets.shape[0]
        if scheme == "without_replacement":
            mass = _without_replacement_mass(draft_rows[0], subsets)
        else:
            mass = _independent_set_mass(draft_rows, subsets)
        padded = np.full((subsets.shape[0], n), -1, dtype=np.int64)
        padded[:, :j] = subsets
        blocks.append(padded)
        masses.append(mass)
    members = np.vstack(blocks)
    mass = np.concatenate(masses)
    real = members >= 0
    inc_col = np.nonzero(real)[0].astype(np.int64)
    inc_token = members[real]
    return DraftColumns(
        "sets", k, n, members, mass, inc_token, inc_col, tuple(sizes), offsets, binom
    )


def _independent_set_mass(draft_rows: FloatArray, subsets: NDArray[np.int64]) -> FloatArray:
    """P(set(omega) = s) for independent draws: a sum over surjections of positions onto s.

    Every term is a product of probabilities, so there is no cancellation (unlike the
    inclusion-exclusion form of seed 000, Appendix K).
    """
    n = draft_rows.shape[0]
    j = subsets.shape[1]
    mass = np.zeros(subsets.shape[0])
    for assignment in cb.surjections(n, j):
        term = np.ones(subsets.shape[0])
        for position, label in enumerate(assignment):
            term *= draft_rows[position, subsets[:, label]]
        mass += term
    return mass


def _without_replacement_mass(q: FloatArray, ordered: NDArray[np.int64]) -> FloatArray:
    """P(the n draws without replacement are exactly the given tokens), summed over orders."""
    n = ordered.shape[1]
    mass = np.zeros(ordered.shape[0])
    for order in cb.permutations(n):
        mass += _sequence_probability(q, ordered[:, order])
    return mass


def _sequence_probability(q: FloatArray, sequences: NDArray[np.int64]) -> FloatArray:
    """Probability of drawing each row of distinct tokens, in order, without replacement.

    The mass left before draw l is summed over the undrawn tokens, never as ``1 - drawn``,
    which cancels catastrophically when one token holds nearly all the draft mass.
    """
    probs = q[sequences]
    result = probs[:, 0].copy()
    for step in range(1, sequences.shape[1]):
        result *= probs[:, step] / _mass_excluding(q, sequences[:, :step])
    return result


def _mass_excluding(q: FloatArray, drawn: NDArray[np.int64]) -> FloatArray:
    """sum(q) minus the drawn tokens of each row, as sums of positive terms only.

    Tokens are ranked by decreasing q; with suffix sums R[i] = sum of ranks >= i, the gap
    between consecutive drawn ranks (a, b) holds R[a + 1] - R[b], whose relative error is
    at most about k * eps because every rank after b carries no more mass than rank a + 1.
    """
    order = np.argsort(-q, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0])
    suffix = np.append(np.cumsum(q[order][::-1])[::-1], 0.0)
    ranks = np.sort(rank[drawn], axis=1)
    starts = np.hstack([np.zeros((ranks.shape[0], 1), dtype=np.int64), ranks + 1])
    ends = np.hstack([ranks, np.full((ranks.shape[0], 1), order.shape[0], dtype=np.int64)])
    left = np.maximum(suffix[starts] - suffix[ends], 0.0).sum(axis=1)
    return np.maximum(left, np.finfo(float).tiny)


def _tuple_columns(draft_rows: FloatArray, n: int, scheme: str) -> DraftColumns:
    k = draft_rows.shape[1]
    tuples = cb.all_tuples(k, n)
    ordered = np.sort(tuples, axis=1)
    first = np.ones_like(ordered, dtype=bool)
    first[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    if scheme == "without_replacement":
        distinct = first.all(axis=1)
        mass = np.zeros(tuples.shape[0])
        mass[distinct] = _sequence_probability(draft_rows[0], tuples[distinct])
    else:
        mass = np.ones(tuples.shape[0])
        for position in range(n):
            mass *= draft_rows[position, tuples[:, position]]
    rows, cols = np.nonzero(first)
    return DraftColumns(
        "tuples", k, n, tuples, mass, ordered[rows, cols].astype(np.int64), rows.astype(np.int64)
    )
