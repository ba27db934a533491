"""Vectorised enumeration and ranking of token sets and tuples.

Sets of distinct draft tokens are enumerated in colexicographic (colex) order, size by size,
so that a set's column index is a closed-form rank: ``offset[j] + sum_l C(c_l, l + 1)`` for its
sorted members ``c_0 < ... < c_{j-1}``. No Python loop runs per set.
"""

from __future__ import annotations

from math import comb

import numpy as np

from otlp.solvers.arrays import IntArray


def binomial_table(k: int, n: int) -> IntArray:
    """``table[m, j] = C(m, j)`` for ``0 <= m <= k``, ``0 <= j <= n + 1`` (int64)."""
    table = np.zeros((k + 1, n + 2), dtype=np.int64)
    for j in range(n + 2):
        table[:, j] = [comb(m, j) for m in range(k + 1)]
    return table


def count_sets(k: int, sizes: range | list[int]) -> int:
    """Number of subsets of a k-set with the given sizes (exact Python int)."""
    return sum(comb(k, j) for j in sizes)


def colex_subsets(k: int, j: int) -> IntArray:
    """All j-subsets of ``range(k)`` as sorted rows, in colex order; shape ``(C(k, j), j)``."""
    if j == 0:
        return np.zeros((1, 0), dtype=np.int64)
    rows = np.arange(k, dtype=np.int64)[:, None]
    # colex(j, k): for each largest element m, the colex (j-1)-subsets of range(m) then m;
    # those are exactly the first C(m, j-1) rows of colex(j-1, k).
    for size in range(2, j + 1):
        largest = np.arange(size - 1, k, dtype=np.int64)
        counts = np.array([comb(int(m), size - 1) for m in largest], dtype=np.int64)
        starts = np.repeat(np.cumsum(counts) - counts, counts)
        prefix_rows = np.arange(int(counts.sum()), dtype=np.int64) - starts
        rows = np.hstack([rows[prefix_rows], np.repeat(largest, counts)[:, None]])
    return rows


def all_tuples(k: int, n: int) -> IntArray:
    """All ordered n-tuples over ``range(k)`` in mixed-radix order; shape ``(k**n, n)``."""
    grids = np.indices((k,) * n, dtype=np.int64)
    return grids.reshape(n, -1).T.copy()


def tuple_rank(tuples: IntArray, k: int) -> IntArray:
    """Mixed-radix index of each ordered tuple (inverse of :func:`all_tuples`)."""
    n = tuples.shape[1]
    weights = k ** np.arange(n - 1, -1, -1, dtype=np.int64)
    return tuples @ weights
