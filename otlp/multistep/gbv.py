"""Greedy multi-path block verification (GBV, [GBV] §5): ranking and skewed draft.

K paths are drafted i.i.d. from M_s; a global ranking of length-L paths is fixed and the
highest-ranked drafted path is selected. If the ranking lists paths x^(1) < x^(2) < ..., the
selected path has the skewed draft law ([GBV] Eq. 25)

    q~(x^(j)) = (sum_{i <= j} M_s(x^(i)))^K - (sum_{i < j} M_s(x^(i)))^K,

and block verification then runs on that path with target M_b and draft q~ (Lemma 4.4).
A tree-based ranking (Definition 5.2) orders the children of every prefix by a local key and
ranks paths lexicographically; then q~ along a path has the closed form of Eqs. 28–29,

    q~(x_1:i) = (S(x_1:i) + M_s(x_1:i))^K - S(x_1:i)^K,
    S(x_1:i)  = sum_{j <= i} M_s(x_<j) * sum_{y ranked below x_j at x_<j} M_s(y | x_<j),

which needs on-path values only. Local keys (:data:`RANKINGS`): ``"ratio"`` ranks children by
increasing M_b / M_s (Eq. 27, so the highest-ratio drafted child wins); ``"inverse-ratio"`` is
the opposite direction. Ties are broken by token id, so every local ordering is injective.
"""

from __future__ import annotations

import numpy as np

from otlp.args import canonical_name
from otlp.solvers.arrays import FloatArray, IntArray

RANKINGS = ("ratio", "inverse-ratio")


def check_ranking(ranking: object) -> str:
    """``ranking``'s canonical spelling in :data:`RANKINGS`, read as method names are
    (:func:`otlp.args.canonical_name`: case and surrounding spaces ignored, ``-`` and ``_``
    alike: ``"Inverse_Ratio"`` is ``"inverse-ratio"``), or a ``ValueError`` naming it."""
    name = canonical_name(ranking, "ranking").replace("_", "-")
    if name not in RANKINGS:
        raise ValueError(f"ranking: expected one of {', '.join(RANKINGS)}, got {ranking!r}")
    return name


def local_key(target: FloatArray, draft: FloatArray, ranking: str = "ratio") -> FloatArray:
    """The local key children are ranked by: M_b / M_s (Eq. 27; +inf where only M_b > 0, 0
    where both are 0), negated for ``"inverse-ratio"`` (any spelling :func:`check_ranking`
    reads)."""
    ranking = check_ranking(ranking)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # inf: ranked first
        key = np.where(draft > 0, target / draft, np.where(target > 0, np.inf, 0.0))
    return -key if ranking == "inverse-ratio" else key


def mass_ranked_below(key: FloatArray, draft: FloatArray) -> FloatArray:
    """For every token, the draft mass of the children ranked strictly below it by ``key``
    (ties: the lower token id ranks lower), along the last axis. Tokens of zero draft mass
    add nothing, so only the draft's support is sorted (k tokens under a top-k draft)."""
    out = np.zeros_like(draft)
    for row in np.ndindex(draft.shape[:-1]):
        support = np.flatnonzero(draft[row] > 0)
        order = support[_stable_argsort(key[row][support])]
        ordered = draft[row][order]
        out[row][order] = np.cumsum(ordered) - ordered
    return out


def _stable_argsort(values: FloatArray) -> IntArray:
    """``np.argsort(values, kind="stable")`` by the faster unstable sort, then equal values
    put back in index order (ties are rare: only their runs are re-sorted)."""
    order = np.argsort(values)
    ranked = values[order]
    tied = np.zeros(order.shape[0], dtype=bool)
    same = ranked[1:] == ranked[:-1]
    tied[1:] |= same
    tied[:-1] |= same
    if tied.any():
        runs = np.cumsum(np.concatenate([[True], ~same]))[tied]  # run label of each tied slot
        members = order[tied]
        order[tied] = members[np.lexsort((members, runs))]
    return order


def local_ranks(target: FloatArray, draft: FloatArray, ranking: str = "ratio") -> IntArray:
    """Rank (0 = lowest) of every token among the children of a prefix, along the last axis."""
    key = local_key(target, draft, ranking)
    order = np.argsort(key, axis=-1, kind="stable")  # ties: lower token id ranks lower
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(key.shape[-1]), axis=-1)
    return ranks


def path_rank_keys(
    target: FloatArray, draft: FloatArray, tokens: IntArray, ranking: str = "ratio"
) -> IntArray:
    """Local rank of each drafted token at its prefix, ``(P, L)`` (Definition 5.2's tuple)."""
    steps = tokens.shape[1]
    ranks = local_ranks(target[:, :steps], draft, ranking)
    return ranks[np.arange(tokens.shape[0])[:, None], np.arange(steps)[None, :], tokens]


def select_path(
    target: FloatArray, draft: FloatArray, tokens: IntArray, ranking: str = "ratio"
) -> int:
    """The highest-ranked of K drafted paths under the tree-based ranking (Definition 5.2),
    from on-path values only: ``target[k, d]`` and ``draft[k, d]`` are M_b and M_s of token
    ``tokens[k, d]`` after its prefix. Two paths first differ where they share their prefix,
    so they compare by the local key of :func:`local_ranks` there (ties: the higher token id
    ranks higher); equal paths: the later index. Same answer as
    ``tree_order(path_rank_keys(...))[-1]`` in O(K L) instead of K L sorts of the vocabulary.
    """
    key = local_key(target, draft, ranking)
    best = 0
    for k in range(1, tokens.shape[0]):
        differ = np.flatnonzero(tokens[k] != tokens[best])
        if differ.shape[0] == 0:
            best = k
            continue
        d = int(differ[0])
        if (key[k, d], tokens[k, d]) > (key[best, d], tokens[best, d]):
            best = k
    return best


def tree_order(keys: IntArray) -> IntArray:
    """Path indices sorted by increasing lexicographic order of their rank tuples."""
    return np.lexsort(keys.T[::-1])


def skewed_conditionals(
    target: FloatArray,
    draft: FloatArray,
    tokens: IntArray,
    paths: int,
    ranking: str = "ratio",
    keys: FloatArray | None = None,
) -> tuple[FloatArray, FloatArray]:
    """q~(. | x_<i) along each path (``(P, L, V)``) and q~(x_1:L) (``(P,)``); Eqs. 28–29.

    ``target`` and ``draft`` are the on-path laws ``(P, >= L, V)`` and ``(P, L, V)``;
    ``keys`` ``(P, L, V)``, if given, are the local keys children are ranked by (default
    :func:`local_key` of target and draft), so that a caller's path selection and the skewed
    draft rank alike bit for bit. Differences of K-th powers are evaluated as
    ``(b - a) * sum_j b^j a^(K-1-j)`` so that tiny path masses do not cancel; only the draft's
    support is computed (q~ is 0 elsewhere).
    """
    count, steps = tokens.shape
    rows = np.arange(count)
    below_mass = np.zeros(count)  # S(x_<i): draft mass of paths ranked below the subtree
    prefix_mass = np.ones(count)  # M_s(x_<i)
    parent = _power_gap(below_mass, below_mass + prefix_mass, paths)
    conditionals = np.empty((count, steps, draft.shape[-1]))
    for i in range(steps):
        q = draft[:, i]
        key = local_key(target[:, i], q, ranking) if keys is None else keys[:, i]
        below = mass_ranked_below(key, q)
        r, c = np.nonzero(q)
        lo = below_mass[r] + prefix_mass[r] * below[r, c]
        child = np.zeros_like(q)
        mass = prefix_mass[r] * q[r, c]
        child[r, c] = mass * _power_sum(lo, lo + mass, paths)
        with np.errstate(invalid="ignore", divide="ignore"):
            conditionals[:, i] = np.where(parent[:, None] > 0, child / parent[:, None], q)
        x = tokens[:, i]
        below_mass = below_mass + prefix_mass * below[rows, x]
        prefix_mass = prefix_mass * q[rows, x]
        parent = child[rows, x]
    return conditionals, parent


def skewed_law(path_mass: FloatArray, order: IntArray, paths: int) -> FloatArray:
    """q~ over paths for an arbitrary global ranking (Eq. 25; brute-force definition).

    ``order`` lists path indices from lowest to highest rank.
    """
    ranked = path_mass[order]
    upper = np.cumsum(ranked)
    lower = upper - ranked
    out = np.empty_like(path_mass)
    # ranked * sum(...) rather than _power_gap(lower, upper): upper - lower loses a tiny mass.
    out[order] = ranked * _power_sum(lower, upper, paths)
    return out


def _power_sum(a: FloatArray, b: FloatArray, power: int) -> FloatArray:
    """sum_{j < power} b^j a^(power - 1 - j), so that b^power - a^power = (b - a) * this."""
    return np.sum([b**j * a ** (power - 1 - j) for j in range(power)], axis=0)


def _power_gap(a: FloatArray, b: FloatArray, power: int) -> FloatArray:
    """b^power - a^power without cancellation."""
    return (b - a) * _power_sum(a, b, power)
