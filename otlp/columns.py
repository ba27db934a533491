"""Draft columns: the right-hand vertices of the OTLP, as sets of distinct tokens or as tuples.

The relaxed OTLP ([GR] Eq. 2) depends on a drafted n-tuple only through ``set(omega)``,
so every draft scheme can be indexed by sets of distinct tokens, with the mass of a set being
the probability that the drafted tuple has exactly that set. Splitting a set-indexed solution
in proportion to the tuple masses gives an ordered-tuple solution with the same marginals
and acceptance; the conditional pi(. | omega) is the same for all tuples with one set. The
ordered-tuple form (``k**n`` columns) is kept for cross-checks and for [SpecHub]'s LP.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import comb

import numpy as np
from numpy.typing import NDArray

from otlp import combinatorics as cb
from otlp import greedy
from otlp.limits import check_size, check_work, power
from otlp.reprs import dataclass_repr
from otlp.solvers.arrays import BoolArray, FloatArray

FORMS = ("sets", "tuples")


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

    __repr__ = dataclass_repr

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
    """(columns, incidence pairs) a column set would have: exact ints, computed without
    allocating (k^n is capped without being computed when it is astronomically large)."""
    if form == "tuples":
        count = power(k, n)
        return count, count * min(n, k)
    return cb.count_sets(k, sizes), sum(j * comb(k, j) for j in sizes)


def mass_operations(scheme: str, k: int, n: int, sizes: range, distinct_rows: bool) -> int:
    """Elementary array operations the set masses take (see :func:`_set_columns`)."""
    if scheme == "without_replacement":
        return comb(k, n) * n * n * 2**n
    if distinct_rows:  # two passes over 2^j states per position and label
        return sum(comb(k, j) * 3 * n * j * 2**j for j in sizes)
    return sum(comb(k, j) * j * n * (n + 1) for j in sizes)


def build_columns(form: str, draft_rows: FloatArray, n: int, scheme: str) -> DraftColumns:
    """Enumerate columns and their masses for a draft scheme over ``k`` local tokens.

    ``draft_rows`` is ``(n, k)``: the distribution of each draw (i.i.d.: equal rows). For
    sampling without replacement ``draft_rows[0]`` is the base distribution.
    """
    if form not in FORMS:
        raise ValueError(f"form: expected one of {FORMS}, got {form!r}")
    k = draft_rows.shape[1]
    sizes = set_sizes(scheme, k, n)
    _, pairs = column_count(form, k, n, sizes)
    check_size(f"draft columns ({form}, k={k}, n={n})", pairs)
    if form == "sets":
        distinct = not np.all(draft_rows == draft_rows[:1])
        work = mass_operations(scheme, k, n, sizes, distinct)
        check_work(f"draft set masses ({scheme}, k={k}, n={n})", work)
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
        mass = set_mass(draft_rows, n, scheme, subsets)
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


def set_mass(
    draft_rows: FloatArray,
    n: int,
    scheme: str,
    subsets: NDArray[np.int64],
    scale: FloatArray | None = None,
) -> FloatArray:
    """P(set(omega) = s) for each row s of ``subsets`` (local ids, all of one size).

    With ``scale`` (one positive number per set; not for the greedy scheme) the members'
    draft probabilities are divided by it wherever they enter as a drawn token's factor
    (never in the mass left for the next draw), which divides the mass by ``scale ** n``:
    every term of a set mass multiplies exactly n such factors (:func:`log_set_mass`).
    """
    if scheme == "without_replacement":
        return _without_replacement_mass(draft_rows[0], subsets, scale)
    if scheme == "greedy":
        return greedy.set_mass(draft_rows[0], n, subsets)
    return _independent_set_mass(draft_rows, subsets, scale)


def log_set_mass(
    draft_rows: FloatArray, n: int, scheme: str, subsets: NDArray[np.int64]
) -> FloatArray:
    """log P(set(omega) = s) for each row s of ``subsets``, finite whenever the mass is
    positive in exact arithmetic: the project's one rule for draft-tuple masses that may
    underflow (two drafts of probability 1e-200 each have mass 1e-400, 0 as a double).

    Each set's members' probabilities are scaled by their largest before they are multiplied
    (:func:`set_mass` with ``scale``), and ``n log(scale)`` is added back; a greedy set mass is
    one draw's probability (degree 1, no product to underflow). -inf where the mass is 0.
    """
    if scheme == "greedy":
        with np.errstate(divide="ignore"):
            return np.log(greedy.set_mass(draft_rows[0], n, subsets))
    largest = draft_rows[:, subsets].max(axis=(0, 2)) if subsets.size else np.ones(0)
    scale = np.where(largest > 0, largest, 1.0)
    scaled = set_mass(draft_rows, n, scheme, subsets, scale)
    with np.errstate(divide="ignore"):
        return np.where(scaled > 0, np.log(scaled) + n * np.log(scale), -np.inf)


def log_tuple_mass(
    draft_rows: FloatArray, n: int, scheme: str, tuples: NDArray[np.int64]
) -> FloatArray:
    """log P(omega = t) for ordered tuples t (rows, local ids, draw order): the same rule as
    :func:`log_set_mass` (factors summed as logs, the mass left for the next draw without
    replacement summed over the undrawn tokens)."""
    if scheme == "greedy":
        with np.errstate(divide="ignore"):
            return np.log(greedy.tuple_mass(draft_rows[0], n, tuples))
    with np.errstate(divide="ignore"):
        factors = np.log(draft_rows[np.arange(n), tuples])
        out = factors.sum(axis=1)
        if scheme == "without_replacement":
            distinct = (np.diff(np.sort(tuples, axis=1), axis=1) != 0).all(axis=1)
            ranking = _suffix_ranking(draft_rows[0])
            for step in range(1, n):
                out -= np.log(_mass_excluding(draft_rows[0], tuples[:, :step], ranking))
            out = np.where(distinct, out, -np.inf)
    return out


def log_column_mass(
    columns: DraftColumns, draft_rows: FloatArray, scheme: str, column: int
) -> float:
    """log of column ``column``'s draft mass by the one rule (:func:`log_set_mass`,
    :func:`log_tuple_mass`): finite for a possible draft whose mass underflowed to 0."""
    return float(log_column_masses(columns, draft_rows, scheme, np.array([column]))[0])


def log_column_masses(
    columns: DraftColumns, draft_rows: FloatArray, scheme: str, which: NDArray[np.int64]
) -> FloatArray:
    """:func:`log_column_mass` of each column in ``which``, vectorised (sets grouped by size)."""
    members = columns.members[which]
    if columns.form == "tuples":
        return log_tuple_mass(draft_rows, columns.n, scheme, members)
    sizes = (members >= 0).sum(axis=1)
    out = np.empty(members.shape[0])
    for size in np.unique(sizes):
        block = sizes == size
        out[block] = log_set_mass(draft_rows, columns.n, scheme, members[block, :size])
    return out


def possible_columns(columns: DraftColumns, draft_rows: FloatArray, scheme: str) -> BoolArray:
    """Columns the scheme can draft: positive mass, or mass that underflowed to 0 while its
    log by the one rule (:func:`log_column_masses`) is finite."""
    possible = columns.mass > 0
    lost = np.flatnonzero(~possible)
    if lost.size:
        possible[lost] = log_column_masses(columns, draft_rows, scheme, lost) > -np.inf
    return possible


def set_sizes(scheme: str, k: int, n: int) -> range:
    """The sizes a set of distinct drafted tokens can have under ``scheme``."""
    exact_size = scheme in ("without_replacement", "greedy")
    return range(n, n + 1) if exact_size else range(1, min(n, k) + 1)


def _scaled(probs: FloatArray, scale: FloatArray | None) -> FloatArray:
    """Member probabilities (one row per set) divided by their set's ``scale``."""
    return probs if scale is None else probs / scale[:, None]


def _independent_set_mass(
    draft_rows: FloatArray, subsets: NDArray[np.int64], scale: FloatArray | None = None
) -> FloatArray:
    """P(set(omega) = s) for independent draws, as a sum of positive terms only (no
    inclusion-exclusion cancellation as in [GR] Appendix K).

    Equal rows (i.i.d.): A_l(m), the probability that m given draws all land in the first l
    tokens of s and hit each of them, obeys A_l(m) = sum_t C(m, t) q_l^t A_{l-1}(m - t);
    O(j n^2) per set. Distinct rows: dynamic programming over draw positions on the subset of
    s covered so far; O(n j 2^j) per set. Neither enumerates the j^n maps of draws to tokens.
    """
    if np.all(draft_rows == draft_rows[:1]):
        return _iid_set_mass(draft_rows[0], subsets, draft_rows.shape[0], scale)
    count, j = subsets.shape
    covered = np.zeros((count, 1 << j))
    covered[:, 0] = 1.0
    for row in draft_rows:
        probs = _scaled(row[subsets], scale)  # (count, j)
        step = np.zeros_like(covered)
        masks = np.arange(1 << j)
        for label in range(j):
            bit = 1 << label
            prob = probs[:, label : label + 1]
            fresh = masks[(masks & bit) == 0]  # token newly covered, or covered again
            step[:, fresh | bit] += covered[:, fresh] * prob
            step[:, fresh | bit] += covered[:, fresh | bit] * prob
        covered = step
    return covered[:, -1]


def _iid_set_mass(
    q: FloatArray, subsets: NDArray[np.int64], n: int, scale: FloatArray | None = None
) -> FloatArray:
    count, j = subsets.shape
    draws = np.arange(n + 1)
    table = np.zeros((count, n + 1))
    table[:, 0] = 1.0
    member_probs = _scaled(q[subsets], scale)
    for label in range(j):
        probs = member_probs[:, label][:, None]
        power = np.ones((count, 1))
        new = np.zeros_like(table)
        for t in range(1, n + 1):
            power = power * probs
            ways = np.array([comb(int(m), t) for m in draws[t:]], dtype=np.float64)
            new[:, t:] += ways * power * table[:, : n + 1 - t]
        table = new
    return table[:, n]


def _without_replacement_mass(
    q: FloatArray, members: NDArray[np.int64], scale: FloatArray | None = None
) -> FloatArray:
    """P(the n draws without replacement are exactly the given tokens, in any order).

    Dynamic programming over the subsets T of each set (O(n 2^n) instead of n! orders):
    P(first |T| draws are T) = sum_{x in T} P(T - x) q_x / (mass left outside T - x).
    """
    count, n = members.shape
    ranking = _suffix_ranking(q)
    bits = (np.arange(1 << n)[:, None] >> np.arange(n)) & 1
    # Mass left after drawing exactly the tokens of each subset, one column per subset.
    left = np.empty((count, 1 << n))
    left[:, 0] = q.sum()
    for mask in range(1, 1 << n):
        left[:, mask] = _mass_excluding(q, members[:, bits[mask] == 1], ranking)
    probs = _scaled(q[members], scale)
    reach = np.zeros((count, 1 << n))
    reach[:, 0] = 1.0
    for mask in range(1, 1 << n):
        for label in np.flatnonzero(bits[mask]):
            before = mask & ~(1 << int(label))
            ratio = np.divide(
                probs[:, label],
                left[:, before],
                out=np.zeros(count),
                where=left[:, before] > 0,
            )
            reach[:, mask] += reach[:, before] * ratio
    return reach[:, -1]


def sequence_probability(q: FloatArray, sequences: NDArray[np.int64]) -> FloatArray:
    """Probability of drawing each row of distinct tokens, in order, without replacement.

    The mass left before draw l is summed over the undrawn tokens, never as ``1 - drawn``,
    which cancels catastrophically when one token holds nearly all the draft mass.
    """
    probs = q[sequences]
    result = probs[:, 0].copy()
    ranking = _suffix_ranking(q)
    for step in range(1, sequences.shape[1]):
        left = _mass_excluding(q, sequences[:, :step], ranking)
        # left >= probs[:, step] always; left = 0 only where the draw itself has mass 0.
        result *= np.divide(probs[:, step], left, out=np.zeros_like(left), where=left > 0)
    return result


def _suffix_ranking(q: FloatArray) -> tuple[NDArray[np.int64], FloatArray]:
    """Rank of each token by decreasing q, and suffix sums R[i] = sum of ranks >= i."""
    order = np.argsort(-q, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0])
    return rank, np.append(np.cumsum(q[order][::-1])[::-1], 0.0)


def _mass_excluding(
    q: FloatArray,
    drawn: NDArray[np.int64],
    ranking: tuple[NDArray[np.int64], FloatArray] | None = None,
) -> FloatArray:
    """sum(q) minus the drawn tokens of each row, as sums of positive terms only.

    Tokens are ranked by decreasing q; with suffix sums R[i] = sum of ranks >= i, the gap
    between consecutive drawn ranks (a, b) holds R[a + 1] - R[b], whose relative error is
    at most about k * eps because every rank after b carries no more mass than rank a + 1.
    ``ranking`` (from :func:`_suffix_ranking`) may be passed to share it between calls.
    """
    rank, suffix = ranking if ranking is not None else _suffix_ranking(q)
    ranks = np.sort(rank[drawn], axis=1)
    starts = np.hstack([np.zeros((ranks.shape[0], 1), dtype=np.int64), ranks + 1])
    ends = np.hstack([ranks, np.full((ranks.shape[0], 1), q.shape[0], dtype=np.int64)])
    return np.maximum(suffix[starts] - suffix[ends], 0.0).sum(axis=1)


def _tuple_columns(draft_rows: FloatArray, n: int, scheme: str) -> DraftColumns:
    k = draft_rows.shape[1]
    tuples = cb.all_tuples(k, n)
    ordered = np.sort(tuples, axis=1)
    first = np.ones_like(ordered, dtype=bool)
    first[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    if scheme == "without_replacement":
        distinct = first.all(axis=1)
        mass = np.zeros(tuples.shape[0])
        mass[distinct] = sequence_probability(draft_rows[0], tuples[distinct])
    elif scheme == "greedy":
        mass = greedy.tuple_mass(draft_rows[0], n, tuples)
    else:
        mass = np.ones(tuples.shape[0])
        for position in range(n):
            mass *= draft_rows[position, tuples[:, position]]
    rows, cols = np.nonzero(first)
    return DraftColumns(
        "tuples", k, n, tuples, mass, ordered[rows, cols].astype(np.int64), rows.astype(np.int64)
    )
