"""Problem builders: instance -> backend-neutral data. Builders never solve.

* :func:`relaxed_system` — the relaxed OTLP ([GR] Eq. 2) as a bipartite system, which
  becomes an LP (:meth:`BipartiteSystem.to_lp`) or the max-flow network of §5.2
  (:meth:`BipartiteSystem.to_maxflow`).
* :func:`outer_system`, :func:`inner_system` — the two independent halves of the
  complementary-slackness system (Theorem 5.1, Eqs. 6a/6b), solved as max-flow (Appendix F).
* :func:`full_otlp_lp`, :func:`full_otlp_transport` — the OTLP itself (Eq. 1) with the
  target mass outside the draft vocabulary in one aggregated row.
* :func:`spechub_lp` — SpecHub's simplified LP for a given draft joint over ordered tuples
  ([SpecHub] §3.2): one variable per (tuple, draft position).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from otlp.columns import DraftColumns
from otlp.instance import Instance
from otlp.limits import check_size
from otlp.solvers.arrays import FloatArray, IntArray
from otlp.solvers.base import LinearProgram, MaxFlowProblem, TransportProblem


@dataclass(frozen=True)
class BipartiteSystem:
    """Tokens (left) and draft columns (right) with one uncapacitated arc per incidence pair.

    ``left``/``right`` are draft-vocabulary token ids and column ids; ``arc_left``/
    ``arc_right`` index into them. A solution assigns a value S to every arc.
    """

    columns: DraftColumns
    left: IntArray
    left_cap: FloatArray
    right: IntArray
    right_cap: FloatArray
    arc_left: IntArray
    arc_right: IntArray

    @property
    def left_count(self) -> int:
        return int(self.left.shape[0])

    @property
    def num_arcs(self) -> int:
        return int(self.arc_left.shape[0])

    def arc_tokens(self) -> IntArray:
        """Draft-vocabulary token of each arc."""
        return self.left[self.arc_left]

    def arc_columns(self) -> IntArray:
        """Column id of each arc."""
        return self.right[self.arc_right]

    def to_maxflow(self) -> MaxFlowProblem:
        """Source -> tokens (cap p), tokens -> columns (inf), columns -> sink (cap mass)."""
        n_left, n_right = self.left_count, int(self.right.shape[0])
        source, sink = n_left + n_right, n_left + n_right + 1
        tails = np.concatenate(
            [np.full(n_left, source), self.arc_left, n_left + np.arange(n_right)]
        ).astype(np.int64)
        heads = np.concatenate(
            [np.arange(n_left), n_left + self.arc_right, np.full(n_right, sink)]
        ).astype(np.int64)
        caps = np.concatenate([self.left_cap, np.full(self.num_arcs, np.inf), self.right_cap])
        return MaxFlowProblem(n_left + n_right + 2, tails, heads, caps, source, sink)

    def arc_values_from_flow(self, flows: FloatArray) -> FloatArray:
        """The S values (token -> column arc flows) inside a max-flow solution."""
        return flows[self.left_count : self.left_count + self.num_arcs]

    def to_lp(self) -> LinearProgram:
        """maximize sum S s.t. row sums <= p, column sums <= mass, S >= 0."""
        arcs = np.arange(self.num_arcs)
        ones = np.ones(self.num_arcs)
        rows = sp.csr_matrix((ones, (self.arc_left, arcs)), shape=(self.left_count, self.num_arcs))
        cols = sp.csr_matrix(
            (ones, (self.arc_right, arcs)), shape=(self.right.shape[0], self.num_arcs)
        )
        return LinearProgram(
            c=ones,
            A_ub=sp.vstack([rows, cols]).tocsr(),
            b_ub=np.concatenate([self.left_cap, self.right_cap]),
        )


def relaxed_system(inst: Instance, form: str = "sets") -> BipartiteSystem:
    """The relaxed OTLP ([GR] Eq. 2) over the draft vocabulary (Appendix N)."""
    cols = inst.columns(form)
    return BipartiteSystem(
        cols,
        np.arange(inst.k, dtype=np.int64),
        inst.p_local,
        np.arange(cols.count, dtype=np.int64),
        cols.mass,
        cols.inc_token,
        cols.inc_col,
    )


def outer_system(inst: Instance, H_mask: NDArray[np.bool_], form: str = "sets") -> BipartiteSystem:
    """Outer system (Eq. 6a): tokens outside H*, columns not inside H*, arcs between them."""
    cols = inst.columns(form)
    inside = cols.contained_in(H_mask)
    keep = ~H_mask[cols.inc_token] & ~inside[cols.inc_col]
    return _restricted(inst, cols, ~H_mask, ~inside, keep)


def inner_system(inst: Instance, H_mask: NDArray[np.bool_], form: str = "sets") -> BipartiteSystem:
    """Inner system (Eq. 6b): tokens in H*, columns inside H*, arcs between them."""
    cols = inst.columns(form)
    inside = cols.contained_in(H_mask)
    return _restricted(inst, cols, H_mask, inside, inside[cols.inc_col])


def _restricted(
    inst: Instance,
    cols: DraftColumns,
    token_mask: NDArray[np.bool_],
    column_mask: NDArray[np.bool_],
    arc_mask: NDArray[np.bool_],
) -> BipartiteSystem:
    left = np.flatnonzero(token_mask)
    right = np.flatnonzero(column_mask)
    left_pos = np.full(inst.k, -1, dtype=np.int64)
    left_pos[left] = np.arange(left.shape[0])
    right_pos = np.full(cols.count, -1, dtype=np.int64)
    right_pos[right] = np.arange(right.shape[0])
    return BipartiteSystem(
        cols,
        left,
        inst.p_local[left],
        right,
        cols.mass[right],
        left_pos[cols.inc_token[arc_mask]],
        right_pos[cols.inc_col[arc_mask]],
    )


def incidence_matrix(inst: Instance, cols: DraftColumns) -> sp.csr_matrix:
    """0/1 matrix of shape (k + 1, columns): 1 where the token belongs to the column's set."""
    return sp.csr_matrix(
        (np.ones(cols.inc_token.shape[0]), (cols.inc_token, cols.inc_col)),
        shape=(inst.k + 1, cols.count),
    )


def full_otlp_lp(inst: Instance, form: str = "sets") -> tuple[LinearProgram, DraftColumns]:
    """The OTLP (Eq. 1): variables C[i, c] row-major over (k + 1) x columns.

    One column-sum equality is dropped: it is implied by the others because both marginals
    sum to one, and keeping it makes the system degenerate for presolve.
    """
    cols = inst.columns(form)
    rows = inst.k + 1
    check_size(f"full OTLP (k={inst.k}, n={inst.n})", rows * cols.count)
    var = np.arange(rows * cols.count).reshape(rows, cols.count)
    ones = np.ones(rows * cols.count)
    row_sum = sp.csr_matrix(
        (ones, (np.repeat(np.arange(rows), cols.count), var.ravel())),
        shape=(rows, rows * cols.count),
    )
    col_sum = sp.csr_matrix(
        (ones, (np.tile(np.arange(cols.count), rows), var.ravel())),
        shape=(cols.count, rows * cols.count),
    )
    objective = np.asarray(incidence_matrix(inst, cols).todense()).ravel()
    lp = LinearProgram(
        c=objective,
        A_eq=sp.vstack([row_sum, col_sum[:-1]]).tocsr(),
        b_eq=np.concatenate([inst.target_rows, cols.mass[:-1]]),
    )
    return lp, cols


def full_otlp_transport(
    inst: Instance, form: str = "sets"
) -> tuple[TransportProblem, DraftColumns]:
    """The OTLP as balanced optimal transport with the 0/1 membership cost ([SpecHub] §3.1)."""
    cols = inst.columns(form)
    check_size(f"full OTLP (k={inst.k}, n={inst.n})", (inst.k + 1) * cols.count)
    cost = 1.0 - np.asarray(incidence_matrix(inst, cols).todense())
    return TransportProblem(inst.target_rows, cols.mass.copy(), cost), cols


@dataclass(frozen=True)
class SpecHubLP:
    """SpecHub's simplified LP and, per variable, the (token, tuple) entry it feeds."""

    lp: LinearProgram
    var_token: IntArray
    var_tuple: IntArray


def spechub_lp(p_local: FloatArray, tuples: IntArray, mass: FloatArray) -> SpecHubLP:
    """[SpecHub] §3.2 for a draft joint over ordered tuples of draft-vocabulary tokens.

    Variables pi(x, i) for each tuple x and position i; ``sum_i pi(x, i) <= Q(x)`` and, for
    each token y, ``sum_{(x, i): x_i = y} pi(x, i) <= p(y)``; maximise the total.
    """
    tuples = np.asarray(tuples, dtype=np.int64)
    count, n = tuples.shape
    check_size(f"SpecHub LP ({count} tuples, n={n})", count * n)
    var_tuple = np.repeat(np.arange(count), n)
    var_token = tuples.ravel()
    ones = np.ones(count * n)
    per_tuple = sp.csr_matrix((ones, (var_tuple, np.arange(count * n))), shape=(count, count * n))
    per_token = sp.csr_matrix(
        (ones, (var_token, np.arange(count * n))), shape=(p_local.shape[0], count * n)
    )
    lp = LinearProgram(
        c=ones,
        A_ub=sp.vstack([per_tuple, per_token]).tocsr(),
        b_ub=np.concatenate([np.asarray(mass, dtype=np.float64), p_local]),
    )
    return SpecHubLP(lp, var_token, var_tuple)
