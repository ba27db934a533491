"""Rules built from an OTLP solution (``otlp.solve``) on the instance's own draft joint.

* ``ot`` — the optimal transport itself: output ~ pi(. | omega) from a verified plan ([GR],
  Eq. 1 and 3); acceptance alpha*.
* ``canonical`` — the canonical decomposition ([GR] §4, Theorem 4.1 and Appendix B):
  importance sampling beta(i | omega) = S*_{i, omega} / sum_j S*_{j, omega} from a relaxed-OTLP
  solution S* (uniform over set(omega) where the column of S* is zero), then single-draft
  speculative sampling of the selected token against p, whose draft law is
  q~(i) = sum_omega P(omega) beta(i | omega). It is lossless for any beta; with the optimal
  S*, sum_i min(p(i), q~(i)) = alpha* (Theorem B.1).

Plans are solved once per instance and kept (weakly) by the rule object; ``method`` picks
any registered solution method, and a plan that fails verification raises
``otlp.VerificationError`` (``strict=True``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from otlp.api import solve
from otlp.instance import Instance
from otlp.limits import check_size
from otlp.methods import method_names
from otlp.plan import TransportPlan
from otlp.rules.base import DraftThenVerify, sample_rows
from otlp.rules.single import kernel_verify, speculative_kernel
from otlp.solvers.arrays import FloatArray, IntArray


def plan_conditionals(plan: TransportPlan) -> FloatArray:
    """pi(. | column) for every column of ``plan``, shape (columns, k + 1), as one dense array
    (the vectorised form of :meth:`TransportPlan.column_slice`): a possible column whose mass
    underflowed to 0 gets the plan's :meth:`~TransportPlan.negligible_slice`, a column the
    scheme cannot draft a row of zeros."""
    cols = plan.columns
    check_size("dense plan conditionals", cols.count * plan.explicit.shape[0])
    total = plan.row_residual.sum()
    rows = plan.row_residual / total if total > 0 else np.zeros_like(plan.row_residual)
    live = cols.mass > 0
    mass = np.where(live, cols.mass, 1.0)
    # explicit / mass + rows * (col_residual / mass): exact for columns of subnormal mass
    slices = plan.explicit.toarray().T / mass[:, None] + np.outer(plan.col_residual / mass, rows)
    stranded = plan.possible_columns() & ~live
    slices[stranded] = plan.negligible_slice()
    return np.where((live | stranded)[:, None], slices, 0.0)


def importance_weights(plan: TransportPlan) -> tuple[FloatArray, FloatArray]:
    """Theorem 4.1: beta as a dense (columns, k + 1) array, and q~ over the extended vocabulary.

    S* is the plan's explicit part on the incidence pairs (for a full-OTLP plan, C* restricted
    to them, which is a relaxed-OTLP solution with the same objective).
    """
    cols = plan.columns
    k1 = plan.explicit.shape[0]
    check_size("canonical importance weights", cols.count * k1)
    s = np.maximum(np.asarray(plan.explicit.tocsr()[cols.inc_token, cols.inc_col]).ravel(), 0.0)
    col_sum = np.bincount(cols.inc_col, weights=s, minlength=cols.count)
    set_size = np.bincount(cols.inc_col, minlength=cols.count)
    degenerate = col_sum[cols.inc_col] <= 0
    weights = np.where(
        degenerate,
        1.0 / set_size[cols.inc_col],
        s / np.where(degenerate, 1.0, col_sum[cols.inc_col]),
    )
    beta = np.zeros((cols.count, k1))
    beta[cols.inc_col, cols.inc_token] = weights
    return beta, cols.mass @ beta


class _PlanRule(DraftThenVerify):
    """A rule computed from an ``otlp.solve`` plan on the instance's own draft joint."""

    joint_kind = "instance"

    def __init__(self, method: str = "maxflow", **solve_options: Any) -> None:
        super().__init__()
        if method not in method_names():
            raise ValueError(f"method: unknown {method!r}; known: {', '.join(method_names())}")
        self.method = method
        self.solve_options = solve_options

    def __repr__(self) -> str:
        return f"<rule {self.name} (method {self.method}): {self.description}>"

    def plan(self, inst: Instance) -> TransportPlan:
        """The verified plan of ``inst`` by ``self.method`` (solved once per instance)."""
        return self._memo(
            inst, "plan", lambda: solve(inst, self.method, strict=True, **self.solve_options)
        )

    def draft_columns(self, inst: Instance) -> tuple[IntArray, FloatArray]:
        """The plan's columns (sets of distinct tokens, padded with -1) of positive mass."""
        cols = self.plan(inst).columns
        keep = cols.mass > 0
        return cols.members[keep], cols.mass[keep]

    def _column_ids(self, inst: Instance, members: IntArray) -> IntArray:
        """Column of each drafted tuple (or padded set) in the plan."""
        filled = np.where(members >= 0, members, members[:, :1])
        return self.plan(inst).columns.indices_of(filled)


class OptimalTransport(_PlanRule):
    name = "ot"
    description = (
        "the optimal transport pi(. | omega) from a verified otlp.solve plan ([GR] Eq. 1-3); "
        "acceptance alpha*"
    )

    def acceptance(self, inst: Instance) -> float:
        return float(self.plan(inst).acceptance)

    def local_output(self, inst: Instance) -> FloatArray:
        return self.plan(inst).target_marginal()

    def conditionals(self, inst: Instance) -> FloatArray:
        """pi(. | column) for every plan column, (columns, k + 1)."""
        return self._memo(inst, "conditionals", lambda: plan_conditionals(self.plan(inst)))

    def local_conditionals(self, inst: Instance, members: IntArray) -> FloatArray:
        return self.conditionals(inst)[self._column_ids(inst, members)]

    def _verify(self, inst: Instance, drafts: IntArray, rng: np.random.Generator) -> IntArray:
        rows = self.conditionals(inst)[self._column_ids(inst, drafts)]
        return sample_rows(rng, np.maximum(rows, 0.0))


class CanonicalDecomposition(_PlanRule):
    name = "canonical"
    description = (
        "canonical decomposition: importance sampling beta from a relaxed-OTLP solution, then "
        "single-draft speculative sampling ([GR] §4, Theorem 4.1)"
    )

    def weights(self, inst: Instance) -> tuple[FloatArray, FloatArray]:
        """(beta over plan columns, the selected token's law q~)."""
        return self._memo(inst, "weights", lambda: importance_weights(self.plan(inst)))

    def local_conditionals(self, inst: Instance, members: IntArray) -> FloatArray:
        beta, q_tilde = self.weights(inst)
        accept, resid = speculative_kernel(inst.target_rows, q_tilde)
        rows = beta[self._column_ids(inst, members)]
        kept = rows * accept
        return kept + (1.0 - kept.sum(axis=1))[:, None] * resid

    def _verify(self, inst: Instance, drafts: IntArray, rng: np.random.Generator) -> IntArray:
        beta, q_tilde = self.weights(inst)
        selected = sample_rows(rng, beta[self._column_ids(inst, drafts)])
        return kernel_verify(*speculative_kernel(inst.target_rows, q_tilde), selected, rng)
