"""Transport plans: the coupling C of p and the draft joint, and the conditional pi(. | omega).

A plan is stored over the draft vocabulary plus one aggregated "outside" row (the target mass
the draft cannot produce) as explicit sparse entries plus the rank-one residual term of
seed 000, Eq. (3):

    C[i, c] = explicit[i, c] + row_residual[i] * col_residual[c] / sum(row_residual).

For a relaxed-OTLP solution S, explicit = S, row_residual = p - row sums of S and
col_residual = mass - column sums of S; for a complementary-slackness solution this is
Eq. (8). A full OTLP solution (e.g. from POT) has zero residuals. The outside row is spread
over the tokens outside the draft vocabulary in proportion to p.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

from otlp.columns import DraftColumns
from otlp.instance import Instance
from otlp.reprs import plan_repr

FloatArray = NDArray[np.float64]
TINY = 1e-300


@dataclass
class TransportPlan:
    """A coupling of the target p and the draft joint of ``instance``."""

    instance: Instance
    columns: DraftColumns
    explicit: sp.csc_matrix
    row_residual: FloatArray
    col_residual: FloatArray
    method: str = ""
    wall_time: float = 0.0
    messages: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)

    # ----- constructors --------------------------------------------------------------------
    @classmethod
    def from_relaxed(
        cls,
        inst: Instance,
        columns: DraftColumns,
        tokens: NDArray[np.int64],
        cols: NDArray[np.int64],
        values: FloatArray,
        **meta: Any,
    ) -> TransportPlan:
        """Eq. (3) from relaxed-OTLP values S[tokens[e], cols[e]] = values[e]."""
        explicit = sp.csc_matrix((values, (tokens, cols)), shape=(inst.k + 1, columns.count))
        explicit.sum_duplicates()
        target = inst.target_rows
        row_res = target - np.asarray(explicit.sum(axis=1)).ravel()
        col_res = columns.mass - np.asarray(explicit.sum(axis=0)).ravel()
        return cls(inst, columns, explicit, row_res, col_res, **meta)

    @classmethod
    def from_coupling(
        cls, inst: Instance, columns: DraftColumns, coupling: ArrayLike | sp.spmatrix, **meta: Any
    ) -> TransportPlan:
        """A full OTLP solution C of shape (k + 1, columns)."""
        explicit = sp.csc_matrix(coupling)
        if explicit.shape != (inst.k + 1, columns.count):
            raise ValueError(
                f"coupling: expected shape {(inst.k + 1, columns.count)}, got {explicit.shape}"
            )
        return cls(inst, columns, explicit, np.zeros(inst.k + 1), np.zeros(columns.count), **meta)

    # ----- the residual term ---------------------------------------------------------------
    @property
    def residual_total(self) -> float:
        return float(self.row_residual.sum())

    def _residual_scale(self) -> FloatArray:
        """col_residual / sum(row_residual), zero when nothing is left to transport."""
        total = self.residual_total
        if total <= TINY:
            return np.zeros_like(self.col_residual)
        return self.col_residual / total

    # ----- marginals and acceptance (read by the verifier) ---------------------------------
    def target_marginal(self) -> FloatArray:
        """Row sums of C over the draft vocabulary plus the outside row."""
        return (
            np.asarray(self.explicit.sum(axis=1)).ravel()
            + self.row_residual * self._residual_scale().sum()
        )

    def draft_marginal(self) -> FloatArray:
        """Column sums of C."""
        return (
            np.asarray(self.explicit.sum(axis=0)).ravel()
            + self._residual_scale() * self.row_residual.sum()
        )

    def min_entry(self) -> float:
        """The most negative entry of C (0 if none is negative)."""
        explicit_min = float(self.explicit.data.min()) if self.explicit.nnz else 0.0
        scale = self._residual_scale()
        extremes = np.outer(
            [self.row_residual.min(), self.row_residual.max()], [scale.min(), scale.max()]
        )
        return min(explicit_min, float(extremes.min()), 0.0)

    @cached_property
    def acceptance(self) -> float:
        """P(the output token is one of the drafted tokens) = sum of C over incidence pairs."""
        cols = self.columns
        incidence = sp.csc_matrix(
            (np.ones(cols.inc_token.shape[0]), (cols.inc_token, cols.inc_col)),
            shape=self.explicit.shape,
        )
        explicit_part = float(self.explicit.multiply(incidence).sum())
        residual_part = float(
            np.sum(self.row_residual[cols.inc_token] * self._residual_scale()[cols.inc_col])
        )
        return explicit_part + residual_part

    # ----- slices and sampling -------------------------------------------------------------
    def column_slice(self, column: int) -> FloatArray:
        """pi(. | column) over the draft vocabulary plus the outside row (length k + 1)."""
        mass = float(self.columns.mass[column])
        if mass <= 0:
            raise ValueError("omega: has zero probability under the draft scheme")
        values = self.explicit[:, column].toarray().ravel()
        values += self.row_residual * self._residual_scale()[column]
        return values / mass

    def column_of(self, omega: ArrayLike) -> int:
        """Column index of a drafted tuple of global token ids."""
        local = self.instance.to_local(omega)
        return int(self.columns.indices_of(local[None, :])[0])

    def local_slice(self, omega: ArrayLike) -> FloatArray:
        """pi(. | omega) over the draft vocabulary plus the outside row (length k + 1)."""
        return self.column_slice(self.column_of(omega))

    def slice(self, omega: ArrayLike) -> FloatArray:
        """The conditional pi(. | omega) as a dense vector over the whole vocabulary."""
        inst = self.instance
        local = self.local_slice(omega)
        out = np.zeros(inst.vocab_size)
        out[inst.tokens] = local[:-1]
        if inst.p_outside > 0:
            outside = self._outside_tokens
            out[outside] = local[-1] * inst.p[outside] / inst.p[outside].sum()
        return out

    @cached_property
    def _outside_tokens(self) -> NDArray[np.int64]:
        mask = np.ones(self.instance.vocab_size, dtype=bool)
        mask[self.instance.tokens] = False
        return np.flatnonzero(mask & (self.instance.p > 0))

    @cached_property
    def _outside_cdf(self) -> FloatArray:
        weights = self.instance.p[self._outside_tokens]
        return np.cumsum(weights) / weights.sum()

    def sample(
        self, omega: ArrayLike, rng: np.random.Generator, size: int | None = None
    ) -> int | NDArray[np.int64]:
        """Draw verified token(s) from pi(. | omega); global token ids."""
        local = np.clip(self.local_slice(omega), 0.0, None)
        count = 1 if size is None else size
        picks = rng.choice(local.shape[0], size=count, p=local / local.sum())
        out = np.empty(count, dtype=np.int64)
        inside = picks < self.instance.k
        out[inside] = self.instance.tokens[picks[inside]]
        if (~inside).any():
            u = rng.random(int((~inside).sum()))
            out[~inside] = self._outside_tokens[np.searchsorted(self._outside_cdf, u)]
        return int(out[0]) if size is None else out

    def __repr__(self) -> str:
        """Sizes, method, acceptance and verification status — never the arrays."""
        return plan_repr(self)
