"""Grouped-coefficient form of Φ_T and Θ_T ([GR] Appendix K): one term per draft set.

The coefficient of the LogSumExp term of a set s of variables is the probability that the
n i.i.d. draws, restricted to the variables and the ``base`` mass, have exactly s as their
set of distinct variables. The seed writes it by inclusion-exclusion (Eqs. 117-120), which
cancels catastrophically for small q; here it is the same dynamic programme without
subtractions: w(s) = n! [z^n] e^{base z} Π_{i in s} (e^{q_i z} - 1). The sets are all
subsets of size 1..n, O(|T|^n / n!) of them, so this form serves the seed's truncated
solver and the tests; the untruncated solver uses :mod:`softmax_system`.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from otlp.solvers.arrays import FloatArray, IntArray
from otlp.solvers.global_resolution.softmax_system import SoftmaxSystem


@nb.njit(cache=True)
def _count_sets(m: int, n: int) -> int:
    total, choose = 0, 1
    for size in range(1, min(n, m) + 1):
        choose = choose * (m - size + 1) // size
        total += choose
    return total


@nb.njit(cache=True)
def _grouped_sets(q: FloatArray, base: float, n: int) -> tuple[IntArray, FloatArray]:
    """All subsets of size 1..n (lexicographic, padded with -1) and their coefficients."""
    m = q.shape[0]
    count = _count_sets(m, n)
    members = np.full((count, n), -1, dtype=np.int64)
    weights = np.empty(count)
    series = np.empty(n + 1)
    factor = np.empty(n + 1)
    fact_n = 1.0
    for a in range(2, n + 1):
        fact_n *= a
    row = 0
    for size in range(1, min(n, m) + 1):
        combo = np.arange(size)
        while True:
            # series = e^{base z} Π_{i in combo} (e^{q_i z} - 1), truncated at degree n
            term = 1.0
            for a in range(n + 1):
                series[a] = term
                term *= base / (a + 1)
            for j in range(size):
                qi = q[combo[j]]
                term = 1.0
                factor[0] = 0.0
                for a in range(1, n + 1):
                    term *= qi / a
                    factor[a] = term
                for a in range(n, -1, -1):
                    acc = 0.0
                    for b in range(1, a + 1):
                        acc += factor[b] * series[a - b]
                    series[a] = acc
            members[row, :size] = combo
            weights[row] = fact_n * series[n]
            row += 1
            # next combination in lexicographic order
            pos = size - 1
            while pos >= 0 and combo[pos] == m - size + pos:
                pos -= 1
            if pos < 0:
                break
            combo[pos] += 1
            for j in range(pos + 1, size):
                combo[j] = combo[j - 1] + 1
    return members, weights


@nb.njit(cache=True)
def _value_and_receipts(
    alpha: FloatArray, members: IntArray, weights: FloatArray, slack: float
) -> tuple[float, FloatArray]:
    """Σ_s w(s) log(slack + c(s)) and each token's receipts, with stable log-sum-exp."""
    value = 0.0
    receipts = np.zeros(alpha.shape[0])
    for row in range(members.shape[0]):
        top = 0.0 if slack > 0 else -np.inf
        for j in range(members.shape[1]):
            i = members[row, j]
            if i >= 0 and alpha[i] > top:
                top = alpha[i]
        total = slack * math.exp(-top) if slack > 0 else 0.0
        for j in range(members.shape[1]):
            i = members[row, j]
            if i >= 0:
                total += math.exp(alpha[i] - top)
        value += weights[row] * (top + math.log(total))
        for j in range(members.shape[1]):
            i = members[row, j]
            if i >= 0:
                receipts[i] += weights[row] * math.exp(alpha[i] - top) / total
    return value, receipts


class GroupedObjective:
    """F(alpha) and its gradient for a :class:`SoftmaxSystem` by explicit set enumeration."""

    def __init__(self, system: SoftmaxSystem) -> None:
        self.system = system
        self.members, self.weights = _grouped_sets(system.q, system.base, system.n)

    @property
    def num_sets(self) -> int:
        return int(self.weights.shape[0])

    def receipts(self, alpha: FloatArray) -> FloatArray:
        return _value_and_receipts(alpha, self.members, self.weights, self.system.slack)[1]

    def __call__(self, alpha: FloatArray) -> tuple[float, FloatArray]:
        """(F, grad F) for scipy's ``jac=True`` convention."""
        value, receipts = _value_and_receipts(alpha, self.members, self.weights, self.system.slack)
        targets = self.system.targets
        return value - float(targets @ alpha), receipts - targets
