"""Small dense helpers shared by the [GR] checks: relaxed-OTLP solutions (any optimum, by a
random secondary objective), the Theorem 5.1 system, and Eq. (3)'s residual completion.

Independent of otlp's solvers on purpose: scipy's HiGHS on the LP built from the columns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from scipy.optimize import linprog

from otlp.columns import DraftColumns
from otlp.instance import Instance
from otlp.solvers.arrays import BoolArray, FloatArray

# Margins that rest on a reference LP solution cannot be finer than HiGHS's primal feasibility
# tolerance (1e-7): equalities against such solutions are checked to twice that.
LP_TOL = 2e-7


@dataclass(frozen=True)
class Relaxed:
    """The relaxed OTLP over arcs (token i, column c) with i in set(c)."""

    inst: Instance
    cols: DraftColumns
    rows: sp.csr_matrix  # token x arc
    colm: sp.csr_matrix  # column x arc

    @classmethod
    def of(cls, inst: Instance) -> Relaxed:
        cols = inst.columns("sets")
        arcs = np.arange(cols.inc_token.shape[0])
        ones = np.ones(arcs.shape[0])
        rows = sp.csr_matrix((ones, (cols.inc_token, arcs)), shape=(inst.k, arcs.shape[0]))
        colm = sp.csr_matrix((ones, (cols.inc_col, arcs)), shape=(cols.count, arcs.shape[0]))
        return cls(inst, cols, rows, colm)

    @property
    def arcs(self) -> int:
        return int(self.cols.inc_token.shape[0])

    def optimum(self) -> float:
        return -_solve(-np.ones(self.arcs), self._ub(), None).fun

    def _ub(self) -> tuple[sp.csr_matrix, FloatArray]:
        return sp.vstack([self.rows, self.colm]).tocsr(), np.concatenate(
            [self.inst.p_local, self.cols.mass]
        )

    def random_optimum(self, rng: np.random.Generator) -> FloatArray:
        """An optimal S*: maximise a random objective over the optimal face (within 1e-9;
        the first optimum found if HiGHS calls that face empty)."""
        first = _solve(-np.ones(self.arcs), self._ub(), None)
        a_ub, b_ub = self._ub()
        a_ub = sp.vstack([a_ub, -sp.csr_matrix(np.ones((1, self.arcs)))]).tocsr()
        b_ub = np.append(b_ub, first.fun + 1e-9)
        res = linprog(
            -rng.random(self.arcs), A_ub=a_ub, b_ub=b_ub, bounds=(0, None), method="highs"
        )
        return np.maximum(res.x if res.status == 0 else first.x, 0.0)

    def random_feasible(self, rng: np.random.Generator) -> FloatArray:
        """A feasible S of the relaxed OTLP, usually not optimal (random objective, scaled)."""
        x = _solve(-rng.random(self.arcs) + 0.5, self._ub(), None).x
        return np.maximum(x, 0.0) * rng.uniform(0.3, 1.0)

    def system_violation(self, S: FloatArray, H: BoolArray) -> float:
        """Largest violation of the Theorem 5.1 system (6a)-(6c) by S >= 0 for H* = H."""
        inst, cols = self.inst, self.cols
        inside = cols.contained_in(H)
        tok_in = H[cols.inc_token]
        col_in = inside[cols.inc_col]
        p, mass = inst.p_local, cols.mass
        out_rows = np.bincount(cols.inc_token, S * (~col_in), inst.k)
        in_rows = np.bincount(cols.inc_token, S * col_in, inst.k)
        out_cols = np.bincount(cols.inc_col, S * (~tok_in), cols.count)
        in_cols = np.bincount(cols.inc_col, S * tok_in, cols.count)
        v = [
            np.max(out_rows[~H] - p[~H], initial=0.0),  # 6a rows <=
            np.max(np.abs(out_cols[~inside] - mass[~inside]), initial=0.0),  # 6a cols =
            np.max(np.abs(in_rows[H] - p[H]), initial=0.0),  # 6b rows =
            np.max(in_cols[inside] - mass[inside], initial=0.0),  # 6b cols <=
            np.max(S[tok_in & ~col_in], initial=0.0),  # 6c
            np.max(-S, initial=0.0),
        ]
        return float(max(v))

    def random_system_solution(self, H: BoolArray, rng: np.random.Generator) -> FloatArray:
        """A random S >= 0 satisfying (6a)-(6c), from feasibility LPs of both systems."""
        inst, cols = self.inst, self.cols
        inside = cols.contained_in(H)
        tok_in = H[cols.inc_token]
        col_in = inside[cols.inc_col]
        allowed = tok_in == col_in
        p, mass = inst.p_local, cols.mass
        a_ub = sp.vstack([self.rows[~H], self.colm[inside]]).tocsr()
        b_ub = np.concatenate([p[~H], mass[inside]])
        a_eq = sp.vstack([self.colm[~inside], self.rows[H]]).tocsr()
        b_eq = np.concatenate([mass[~inside], p[H]])
        bounds = [(0, None) if a else (0, 0) for a in allowed]
        res = _solve(rng.random(self.arcs) - 0.5, (a_ub, b_ub), (a_eq, b_eq), bounds)
        return np.maximum(res.x, 0.0)

    def completion(self, S: FloatArray) -> FloatArray:
        """Eq. (3): C = S + p_res p_draft_res / sum p_res, dense (k + 1) x columns."""
        inst, cols = self.inst, self.cols
        C = np.zeros((inst.k + 1, cols.count))
        np.add.at(C, (cols.inc_token, cols.inc_col), S)
        row_res = inst.target_rows - C.sum(axis=1)
        col_res = cols.mass - C.sum(axis=0)
        total = row_res.sum()
        if total > 1e-15:
            C += np.outer(row_res, col_res) / total
        return C

    def acceptance(self, C: FloatArray) -> float:
        return float(C[self.cols.inc_token, self.cols.inc_col].sum())


def _solve(c, ub, eq, bounds=(0, None)):
    a_eq, b_eq = eq if eq is not None else (None, None)
    res = linprog(c, A_ub=ub[0], b_ub=ub[1], A_eq=a_eq, b_eq=b_eq, bounds=bounds, method="highs")
    if res.status != 0:  # HiGHS presolve has called degenerate transport problems infeasible
        res = linprog(
            c,
            A_ub=ub[0],
            b_ub=ub[1],
            A_eq=a_eq,
            b_eq=b_eq,
            bounds=bounds,
            method="highs",
            options={"presolve": False},
        )
    if res.status != 0:
        raise RuntimeError(f"reference LP failed: {res.message}")
    return res


def subsets(k: int) -> NDArray[np.bool_]:
    """Every subset of range(k) as a boolean mask, (2^k, k)."""
    idx = np.arange(1 << k)
    return ((idx[:, None] >> np.arange(k)) & 1).astype(bool)
