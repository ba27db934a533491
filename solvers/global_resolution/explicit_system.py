"""A softmax system over explicitly listed groups of variables with exact masses ([GR] App. K).

Each group g is the set of variable tokens of some draft columns and carries the summed mass
w(g) of those columns (the grouped coefficients of [GR] Appendix K, here taken from exact
set masses, so there is no inclusion-exclusion and no truncation). Receipts and the Hessian
are exact sums over the groups:

    g_i = Σ_{g ∋ i} w(g) c_i / (slack + c(g)),
    M_ij = Σ_{g ∋ i, j} w(g) c_i c_j / (slack + c(g))^2,
    rho_i = slack c_i Σ_{g ∋ i} w(g) / (slack + c(g))^2.

M is dense (m x m) and handed to :func:`~otlp.solvers.global_resolution.newton.newton` as one
"node" of rank m (U = I, Λ = M), which its dense branch solves exactly. The cost is
O(groups · n^2 + m^3) per evaluation: the route for draft schemes without a fast structured
form, e.g. n >= 3 drafts without replacement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba as nb
import numpy as np

from otlp.solvers.arrays import FloatArray, IntArray
from otlp.solvers.global_resolution.softmax_system import Evaluation, SoftmaxSystem


@dataclass(frozen=True)
class ExplicitSystem(SoftmaxSystem):
    """Groups (rows of variable positions, padded with -1) and their masses."""

    members: IntArray
    weights: FloatArray

    @property
    def reachable(self) -> FloatArray:
        return explicit_reachable(self.members, self.weights, self.size)

    def evaluate(self, alpha: FloatArray, hessian: bool = False) -> Evaluation:
        alpha = self.clip(alpha)
        c_log = alpha - alpha.max() if self.gauge_free else alpha
        receipts, rho, matrix = explicit_terms(
            c_log, self.members, self.weights, self.slack, hessian
        )
        if not hessian:
            return Evaluation(alpha, receipts, None, None, None, 0.0)
        identity = np.eye(self.size)
        return Evaluation(alpha, receipts, rho, identity, matrix[None, :, :], 0.0)


@nb.njit(cache=True)
def explicit_reachable(members: IntArray, weights: FloatArray, size: int) -> FloatArray:
    """Mass of the groups containing each variable."""
    out = np.zeros(size)
    for row in range(members.shape[0]):
        for j in range(members.shape[1]):
            if members[row, j] >= 0:
                out[members[row, j]] += weights[row]
    return out


@nb.njit(cache=True)
def explicit_terms(
    log_c: FloatArray, members: IntArray, weights: FloatArray, slack: float, hessian: bool
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Receipts, row sums rho and the dense M, with a stable softmax per group."""
    m = log_c.shape[0]
    receipts = np.zeros(m)
    rho = np.zeros(m)
    matrix = np.zeros((m, m)) if hessian else np.zeros((0, 0))
    width = members.shape[1]
    share = np.empty(width)
    for row in range(members.shape[0]):
        top = 0.0 if slack > 0 else -np.inf
        for j in range(width):
            i = members[row, j]
            if i >= 0 and log_c[i] > top:
                top = log_c[i]
        total = slack * math.exp(-top) if slack > 0 else 0.0
        for j in range(width):
            i = members[row, j]
            share[j] = math.exp(log_c[i] - top) if i >= 0 else 0.0
            total += share[j]
        w = weights[row]
        for j in range(width):
            i = members[row, j]
            if i < 0:
                continue
            share[j] /= total
            receipts[i] += w * share[j]
        if not hessian:
            continue
        free = slack * math.exp(-top) / total if slack > 0 else 0.0
        for j in range(width):
            i = members[row, j]
            if i < 0:
                continue
            rho[i] += w * share[j] * free
            for other_pos in range(width):
                other = members[row, other_pos]
                if other >= 0 and other != i:
                    matrix[i, other] += w * share[j] * share[other_pos]
    return receipts, rho, matrix
