"""Transport plans: the coupling C of p and the draft joint, and the conditional pi(. | omega).

A plan is stored over the draft vocabulary plus one aggregated "outside" row (the target mass
the draft cannot produce) as explicit sparse entries plus the rank-one residual term of
[GR] Eq. (3):

    C[i, c] = explicit[i, c] + row_residual[i] * col_residual[c] / sum(row_residual).

For a relaxed-OTLP solution S, explicit = S, row_residual = p - row sums of S and
col_residual = mass - column sums of S; for a complementary-slackness solution this is
Eq. (8). A full OTLP solution (e.g. from POT) has zero residuals. The outside row is spread
over the tokens outside the draft vocabulary in proportion to p.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

from otlp.args import as_generator, positive_int, real_number
from otlp.columns import DraftColumns, log_column_mass, possible_columns
from otlp.instance import Instance
from otlp.reprs import plan_repr
from otlp.solvers.arrays import FloatArray

#: The largest infeasibility (L1, in probability mass) :meth:`TransportPlan.polished` repairs:
#: a thousand times HiGHS's feasibility tolerance (1e-9); no rounding explains more.
POLISH_LIMIT = 1e-6


@dataclass(frozen=True)
class SliceStatistics:
    """Per-column figures of the conditionals, for every column the draft scheme can produce
    (positive mass, or a mass that underflowed to 0: :meth:`TransportPlan.possible_columns`).

    ``columns`` are the column indices; ``sums[j]`` is sum_i pi(i | c), ``mins[j]`` the
    smallest entry of pi(. | c) and ``negative[j]`` the total of its negative entries. The last
    two are exact for explicit entries; entries outside the explicit pattern are judged by the
    residual term's extremes over all rows, so where a column mixes both and the residual rows
    have both signs they are conservative (never a smaller defect than the true one).
    """

    columns: NDArray[np.int64]
    sums: FloatArray
    mins: FloatArray
    negative: FloatArray


def fit_columns(explicit: sp.csc_matrix, mass: FloatArray) -> FloatArray:
    """Trim ``explicit`` (CSC, entries >= 0) in place so that no column sums above
    its mass, and return ``col_residual = mass - column sums >= 0``.

    A column whose entries were computed as absolute amounts can exceed its mass by rounding;
    below the smallest normal double (2.2e-308) one unit of rounding (4.9e-324) is a large
    share of a column (2% of a column of mass 2.5e-322), and ``max(mass - sums, 0)`` would
    then leave a conditional pi(. | omega) summing to 1.02. The excess is taken off the
    column's largest entry, which is exact in the subnormal range (subtraction of subnormals
    does not round) and relative rounding elsewhere, so every slice
    ``explicit / mass + col_residual / mass`` sums to 1 up to rounding whatever the mass.
    """
    explicit.sum_duplicates()  # a no-op on canonical input (polishing's ``data`` stays valid)
    data = explicit.data
    count = mass.shape[0]
    col_of = np.repeat(np.arange(count), np.diff(explicit.indptr))
    cols = np.bincount(col_of, weights=data, minlength=count)
    over = np.flatnonzero(cols > mass)
    if over.size:
        entries = np.flatnonzero(np.isin(col_of, over))
        order = entries[np.lexsort((data[entries], col_of[entries]))]
        last = np.flatnonzero(np.append(col_of[order][1:] != col_of[order][:-1], True))
        largest = order[last]  # the largest entry of each over-full column
        excess = cols[col_of[largest]] - mass[col_of[largest]]
        data[largest] = np.maximum(data[largest] - excess, 0.0)
        cols = np.bincount(col_of, weights=data, minlength=count)
    return np.maximum(mass - cols, 0.0)


def carry_stranded_columns(
    row_residual: FloatArray, col_residual: FloatArray, target: FloatArray
) -> FloatArray:
    """Residual rows that can carry ``col_residual``: ``row_residual`` itself, or, where the
    rows carry nothing but rounding left some column mass (one subnormal unit is 2.5e-4 of a
    column of mass 2e-320), that mass spread like the target. Without it the Eq. (3) term
    ``rows * col_residual / mass`` is empty and such a column's pi(. | omega) sums below 1.
    """
    left = float(col_residual.sum())
    if left > 0 and not row_residual.sum() > 0:
        return target * left
    return row_residual


def negligible_column_slice(row_residual: FloatArray, target: FloatArray) -> FloatArray:
    """pi(. | omega) of a possible draft whose mass underflowed to 0 (positive by
    :func:`otlp.columns.log_column_mass`): no explicit entry of such a column is representable,
    so Eq. (3) leaves it the residual term alone, the residual rows normalised (the target
    where no residual is left). The column carries no representable mass: the plan's
    marginals and acceptance are unchanged by its slice, which is a probability vector."""
    rows = carry_stranded_columns(row_residual, np.ones(1), target)
    return rows / rows.sum()


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
    # Set by otlp.solve (scipy OptimizeResult habits); class-level defaults for lazy plans.
    verification: Any = None
    status: str = "unchecked"
    success: bool = False
    message: str = "not verified (solve with check=True or call otlp.verify)"

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

    # ----- polishing ------------------------------------------------------------------------
    def polished(self, limit: float | None = None) -> TransportPlan:
        """The nearest plan of the Eq. (3) form whose every slice is a probability vector.

        Exact backends answer to their own tolerances (HiGHS: 1e-9 on the scaled problem),
        which is small against the whole plan but not against a column of tiny mass. Negative
        entries are clipped; rows above their target and then columns above their mass are
        scaled down (so the explicit part is a feasible relaxed-OTLP solution S); what S
        leaves is carried by the rank-one residual term of [GR] Eq. (3) with
        ``row_residual = p - rows(S) >= 0`` and ``col_residual = mass - cols(S) >= 0``. Then
        every column sums to its mass exactly (to rounding) and the target marginal is met up
        to |sum(p) - sum(mass)|, a rounding-level imbalance.

        Polishing repairs rounding and solver tolerances, nothing more: the explicit part's
        infeasibility (negative mass plus the L1 excess of its rows over p and of its columns
        over their mass, ``info["polish"]["violation"]``) bounds how far it moves the LP
        objective (the explicit part's acceptance). A primal with NaN or inf entries, or with
        a violation above ``limit`` (default :data:`POLISH_LIMIT`), is no near-solution: it is
        returned unchanged with ``info["polish"]["refused"]`` saying why and a message, so the
        verifier reports it instead of a repaired plan hiding a failed solve.
        """
        limit = POLISH_LIMIT if limit is None else real_number("limit", limit, minimum=0.0)
        explicit = sp.csc_matrix(self.explicit, dtype=np.float64, copy=True)
        explicit.sum_duplicates()
        data = explicit.data
        target = self.instance.target_rows
        mass = self.columns.mass
        row_of = explicit.indices
        col_of = np.repeat(np.arange(explicit.shape[1]), np.diff(explicit.indptr))
        if not np.isfinite(data).all():
            return self._refuse_polish("the primal has NaN or inf entries", float("nan"))
        clipped = abs(float(data[data < 0].sum()))
        np.maximum(data, 0.0, out=data)
        rows = np.bincount(row_of, weights=data, minlength=target.shape[0])
        cols = np.bincount(col_of, weights=data, minlength=mass.shape[0])
        violation = (
            clipped
            + float(np.maximum(rows - target, 0).sum())
            + float(np.maximum(cols - mass, 0).sum())
        )
        if not violation <= limit:
            return self._refuse_polish(
                f"its infeasibility {violation:.3g} (L1) exceeds {limit:g}", violation
            )
        over = rows > target  # factors only where needed: target / subnormal rows overflows
        row_factor = np.divide(target, rows, out=np.ones_like(rows), where=over)
        data *= row_factor[row_of]
        cols = np.bincount(col_of, weights=data, minlength=mass.shape[0])
        over = cols > mass
        col_factor = np.divide(mass, cols, out=np.ones_like(cols), where=over)
        data *= col_factor[col_of]
        col_residual = fit_columns(explicit, mass)  # scaling rounds subnormal entries up
        rows = np.bincount(row_of, weights=data, minlength=target.shape[0])
        explicit.eliminate_zeros()  # max-flow stores every arc; most carry nothing
        row_residual = np.maximum(target - rows, 0.0)
        row_residual = carry_stranded_columns(row_residual, col_residual, target)
        info = dict(self.info)
        info["polish"] = {
            "violation": violation,
            "clipped_negative": clipped,
            "rows_scaled": int((row_factor < 1).sum()),
            "columns_scaled": int((col_factor < 1).sum()),
        }
        messages = list(self.messages)
        if clipped > 0 or info["polish"]["rows_scaled"] or info["polish"]["columns_scaled"]:
            messages.append(
                f"polished: clipped {clipped:.3g} of negative mass, scaled down "
                f"{info['polish']['rows_scaled']} rows and {info['polish']['columns_scaled']} "
                "columns; the residual term of Eq. (3) carries the rest"
            )
        return TransportPlan(
            self.instance,
            self.columns,
            explicit,
            row_residual,
            col_residual,
            method=self.method,
            wall_time=self.wall_time,
            messages=messages,
            info=info,
        )

    def _refuse_polish(self, reason: str, violation: float) -> TransportPlan:
        """This plan, unchanged but for ``info["polish"]`` and a message saying why."""
        info = dict(self.info)
        info["polish"] = {"refused": reason, "violation": violation}
        messages = [*self.messages, f"not polished: {reason}; the solver's answer is no plan"]
        return replace(self, messages=messages, info=info)

    # ----- the residual term ---------------------------------------------------------------
    @property
    def residual_total(self) -> float:
        return float(self.row_residual.sum())

    def _residual_scale(self) -> FloatArray:
        """col_residual / sum(row_residual), zero when nothing is left to transport."""
        total = self.residual_total
        if not total > 0:
            return np.zeros_like(self.col_residual)
        return self.col_residual / total

    def _residual_rows(self) -> FloatArray:
        """row_residual / sum(row_residual): the rows' share of the residual (sums to 1)."""
        total = self.residual_total
        if not total > 0:
            return np.zeros_like(self.row_residual)
        return self.row_residual / total

    # ----- marginals and acceptance (read by the verifier) ---------------------------------
    def target_marginal(self) -> FloatArray:
        """Row sums of C over the draft vocabulary plus the outside row."""
        return (
            np.asarray(self.explicit.sum(axis=1)).ravel()
            + self._residual_rows() * self.col_residual.sum()
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

    def slice_statistics(self) -> SliceStatistics:
        """Per-column figures of the conditionals pi(.|c) = C[:, c] / mass[c], vectorised.

        Only columns the scheme can draft have a conditional. Each slice of positive mass is
        evaluated as ``explicit / mass + rows * (col_residual / mass)`` so that a column of
        subnormal mass whose entries all come from the residual term still sums to 1 to
        rounding; a possible column whose mass underflowed to 0 has
        :meth:`negligible_slice`, checked like the others.
        """
        mass = self.columns.mass
        live = np.flatnonzero(mass > 0)
        explicit = sp.csc_matrix(self.explicit)
        explicit.sum_duplicates()
        m = np.where(mass > 0, mass, 1.0)
        rows = self._residual_rows()
        share = self.col_residual / m  # residual share of each slice (before rows)
        counts = np.diff(explicit.indptr)
        entry_col = np.repeat(np.arange(mass.shape[0]), counts)
        values = explicit.data / m[entry_col] + rows[explicit.indices] * share[entry_col]
        sums = np.bincount(entry_col, weights=explicit.data, minlength=mass.shape[0]) / m
        sums = sums + share * rows.sum()
        # Entries outside the explicit pattern come from the residual term alone.
        low, high = (rows.min(), rows.max()) if rows.size else (0.0, 0.0)
        residual_min = np.where(share >= 0, share * low, share * high)
        pattern_free = counts < explicit.shape[0]
        mins = np.where(pattern_free, residual_min, np.inf)
        nonempty = np.flatnonzero(counts > 0)
        if nonempty.size:
            starts = explicit.indptr[:-1][nonempty]
            mins[nonempty] = np.minimum(mins[nonempty], np.minimum.reduceat(values, starts))
        negative_rows = rows[rows < 0].sum()
        positive_rows = rows[rows > 0].sum()
        negative = np.bincount(entry_col, weights=np.minimum(values, 0.0), minlength=mass.size)
        negative = negative + pattern_free * np.where(
            share >= 0, share * negative_rows, share * positive_rows
        )
        sums, mins, negative = sums[live], mins[live], negative[live]
        stranded = np.flatnonzero(self.possible_columns() & ~(mass > 0))
        if stranded.size:
            share = self.negligible_slice()
            order = np.argsort(np.concatenate([live, stranded]), kind="stable")
            fill = np.ones(stranded.size)
            live = np.concatenate([live, stranded])[order]
            sums = np.concatenate([sums, fill * share.sum()])[order]
            mins = np.concatenate([mins, fill * share.min()])[order]
            negative = np.concatenate([negative, fill * share[share < 0].sum()])[order]
        return SliceStatistics(live, sums, mins, -negative)

    def possible_columns(self) -> NDArray[np.bool_]:
        """Columns the draft scheme can produce: positive mass, or a mass that underflowed to
        0 whose log is finite by the one rule for tuple masses
        (:func:`otlp.columns.possible_columns`)."""
        inst = self.instance
        return possible_columns(self.columns, inst.draft_rows, inst.scheme)

    def negligible_slice(self) -> FloatArray:
        """pi(. | omega) of every possible column whose mass underflowed to 0
        (:func:`negligible_column_slice` of this plan's residual rows)."""
        return negligible_column_slice(self._residual_rows(), self.instance.target_rows)

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
            inst = self.instance
            if log_column_mass(self.columns, inst.draft_rows, inst.scheme, column) == -np.inf:
                raise ValueError("omega: has zero probability under the draft scheme")
            return self.negligible_slice()
        values = self.explicit[:, column].toarray().ravel() / mass
        return values + self._residual_rows() * (float(self.col_residual[column]) / mass)

    def column_of(self, omega: ArrayLike) -> int:
        """Column index of a drafted tuple of global token ids."""
        local = self.instance.to_local(omega)
        return int(self.columns.indices_of(local[None, :])[0])

    def local_slice(self, omega: ArrayLike) -> FloatArray:
        """pi(. | omega) over the draft vocabulary plus the outside row (length k + 1)."""
        return self.column_slice(self.column_of(omega))

    def slice(self, omega: ArrayLike) -> FloatArray:
        """The conditional pi(. | omega) as a dense vector over the whole vocabulary."""
        return self.instance.global_law(self.local_slice(omega))

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
        self, omega: ArrayLike, rng: object = None, size: int | None = None
    ) -> int | NDArray[np.int64]:
        """Draw verified token(s) from pi(. | omega); global token ids.

        ``rng`` is an int seed, None (fresh entropy) or a ``numpy.random.Generator``;
        ``size=None`` returns one int, an int >= 1 an array of that many tokens.
        """
        rng = as_generator(rng)
        count = 1 if size is None else positive_int("size", size)
        local = self.local_slice(omega)
        total = float(local[local > 0].sum())
        if not (np.isfinite(local).all() and total > 0):
            raise ValueError(
                "omega: pi(. | omega) of this plan is not a probability vector; the plan did "
                "not pass verification (see otlp.verify(plan))"
            )
        picks = rng.choice(local.shape[0], size=count, p=np.clip(local, 0.0, None) / total)
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


@dataclass
class PlanEntries:
    """The explicit entries of a plan in the Eq. (3) form, once a lazy plan materialises them."""

    columns: DraftColumns
    explicit: sp.csc_matrix
    row_residual: FloatArray
    col_residual: FloatArray


class LazyTransportPlan(TransportPlan):
    """A :class:`TransportPlan` whose explicit entries are built on first access.

    Subclasses implement :meth:`_materialized` (build :class:`PlanEntries` once and keep them);
    slices and samples of a drafted omega are the subclass's own per-token computations, and
    the verifier, reading ``columns``/``explicit``/residuals, materialises the whole plan
    (POT's ``lazy_plan`` habit: the plan is a recipe until an entry is asked for). Setting an
    entry materialises the others first.
    """

    def _materialized(self) -> PlanEntries:
        raise NotImplementedError

    @property
    def columns(self) -> DraftColumns:
        """The plan's draft columns (materialises the plan)."""
        return self._materialized().columns

    @columns.setter
    def columns(self, value: DraftColumns) -> None:
        self._materialized().columns = value

    @property
    def explicit(self) -> sp.csc_matrix:
        """The explicit entries S of Eq. (3) (materialises the plan)."""
        return self._materialized().explicit

    @explicit.setter
    def explicit(self, value: sp.csc_matrix) -> None:
        self._materialized().explicit = value

    @property
    def row_residual(self) -> FloatArray:
        """The residual rows of Eq. (3) (materialises the plan)."""
        return self._materialized().row_residual

    @row_residual.setter
    def row_residual(self, value: FloatArray) -> None:
        self._materialized().row_residual = value

    @property
    def col_residual(self) -> FloatArray:
        """The residual columns of Eq. (3) (materialises the plan)."""
        return self._materialized().col_residual

    @col_residual.setter
    def col_residual(self, value: FloatArray) -> None:
        self._materialized().col_residual = value
