"""Communication-free (drafter-invariant) couplings of [Musco]: weighted MinHash and
Gumbel-max. [Musco] names the draft P and the target Q; here p = target, q = draft.

Both use only shared randomness: the target's token does not depend on q, so the output is
exactly p whatever the drafter. Their joints (draft a, output b) are computed in closed form
over the extended draft vocabulary (the outside state has q = 0; aggregating it is exact for
both, because within it the winner is drawn in proportion to p independently of the rest).

* Weighted MinHash: uniforms on [0, V); bin j holds [j, j + q_j] for the drafter and
  [j, j + p_j] for the target; each returns the bin of its first hit. Classifying the first
  point that hits either region gives, with S = sum_j max(p_j, q_j) = 1 + TV,
  P(a = x, b = y) = (1[x = y] min(p_x, q_x) + (q_x - p_x)^+ p_y + q_x (p_y - q_y)^+) / S,
  so P(a = b) = sum_x min(p_x, q_x) (1 + |p_x - q_x|) / (1 + TV) >= (1 - TV) / (1 + TV).
* Gumbel-max: a = argmin E_i / q_i, b = argmin E_i / p_i with shared E_i ~ Exp(1). With
  w_i = q_i / p_i, C(mu) = sum_i max(q_i, mu p_i) (piecewise linear) and
  F(w) = int_0^w dmu / C(mu)^2 (exact: C is linear between breakpoints),
  P(a = x, b = x) = q_x / C(w_x) and P(a = x, b = y) = q_x p_y (F(w_x) - F(w_y))^+ for x != y.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from otlp.instance import Instance
from otlp.rules.base import Rule, draft_ext
from otlp.solvers.arrays import FloatArray, IntArray


def tv_distance(inst: Instance) -> float:
    """Total variation between p and the (first) draft row."""
    return 1.0 - float(np.minimum(inst.p_local, inst.q_local).sum())


def communication_free_bound(inst: Instance) -> float:
    """(1 - TV) / (1 + TV): what weighted MinHash guarantees ([Musco])."""
    tv = tv_distance(inst)
    return (1.0 - tv) / (1.0 + tv)


def minhash_joint(p: FloatArray, q: FloatArray) -> FloatArray:
    """P(draft = x, output = y) of weighted MinHash (rows x, columns y)."""
    joint = np.outer(np.maximum(q - p, 0.0), p) + np.outer(q, np.maximum(p - q, 0.0))
    joint[np.diag_indices_from(joint)] += np.minimum(p, q)
    return joint / np.maximum(p, q).sum()


def gumbel_joint(p: FloatArray, q: FloatArray) -> FloatArray:
    """P(draft = x, output = y) of the Gumbel-max coupling (rows x, columns y)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # q / p overflows to inf for subnormal p: such tokens join the p = 0 group, which
        # moves at most their own (subnormal) mass.
        w = np.where(p > 0, q / np.where(p > 0, p, 1.0), np.inf)
    order = np.argsort(w, kind="stable")
    ws, ps, qs = w[order], p[order], q[order]
    finite = np.isfinite(ws)
    # C(w_j) = sum_{w_i >= w_j} q_i + w_j sum_{w_i < w_j} p_i (ties contribute q_i = w_j p_i).
    q_suffix = np.cumsum(qs[::-1])[::-1]
    p_prefix = np.concatenate([[0.0], np.cumsum(ps)[:-1]])
    c = np.where(finite, q_suffix + np.where(finite, ws, 0.0) * p_prefix, np.inf)
    wf, cf = ws[finite], c[finite]
    # Divided one factor at a time: with subnormal p, w and C reach 1e308 and C * C overflows.
    steps = np.diff(np.concatenate([[0.0], wf])) / cf / np.concatenate([[1.0], cf[:-1]])
    f_sorted = np.full(w.shape[0], np.cumsum(steps)[-1] + 1.0 / cf[-1])  # F(inf) for p = 0
    f_sorted[: wf.shape[0]] = np.cumsum(steps)
    f = np.empty_like(f_sorted)
    f[order] = f_sorted
    c_at = np.empty_like(c)
    c_at[order] = c
    joint = np.outer(q, p) * np.maximum(f[:, None] - f[None, :], 0.0)
    joint[np.diag_indices_from(joint)] = q / c_at
    return joint


class _PairCoupling(Rule):
    """A single-draft coupling given by an explicit joint of (draft, output); drafter and
    target both read the shared randomness, so sampling draws the draft from it too."""

    joint_kind = "single"
    pair_joint: Callable[[FloatArray, FloatArray], FloatArray]  # (p, q) -> joint

    def joint(self, inst: Instance) -> FloatArray:
        """P(draft = x, output = y) over the extended draft vocabulary."""
        return self.pair_joint(inst.target_rows, draft_ext(inst.q_local))

    def acceptance(self, inst: Instance) -> float:
        return float(np.trace(self.joint(inst)))

    def local_output(self, inst: Instance) -> FloatArray:
        return self.joint(inst).sum(axis=0)

    def local_conditionals(self, inst: Instance, members: IntArray) -> FloatArray:
        joint = self.joint(inst)
        drafted = members[:, 0]
        return joint[drafted] / joint[drafted].sum(axis=1, keepdims=True)


class GumbelCoupling(_PairCoupling):
    name = "gumbel"
    description = (
        "Gumbel-max coupling with shared noise, drafter-invariant ([Musco]); exact "
        "acceptance sum_x q_x / C(q_x / p_x)"
    )
    pair_joint = staticmethod(gumbel_joint)

    def _draw_local(
        self, inst: Instance, rng: np.random.Generator, size: int
    ) -> tuple[IntArray, IntArray]:
        p, q = inst.target_rows, draft_ext(inst.q_local)
        noise = rng.gumbel(size=(size, p.shape[0]))  # the shared randomness
        with np.errstate(divide="ignore"):
            log_p, log_q = np.log(p), np.log(q)
        drafts = np.argmax(log_q + noise, axis=1)[:, None]
        return drafts.astype(np.int64), np.argmax(log_p + noise, axis=1).astype(np.int64)


class WeightedMinHash(_PairCoupling):
    name = "minhash"
    description = (
        "weighted MinHash coupling with shared uniforms, drafter-invariant ([Musco]); exact "
        "acceptance >= (1 - TV) / (1 + TV)"
    )
    pair_joint = staticmethod(minhash_joint)

    def _draw_local(
        self, inst: Instance, rng: np.random.Generator, size: int
    ) -> tuple[IntArray, IntArray]:
        first_q, first_p = _first_hits(draft_ext(inst.q_local), inst.target_rows, size, rng)
        return first_q[:, None], first_p


def _first_hits(
    q: FloatArray, p: FloatArray, size: int, rng: np.random.Generator
) -> tuple[IntArray, IntArray]:
    """Bins of the first shared uniform under q's and under p's region, ``size`` times."""
    bins = q.shape[0]
    chunk = 4 * bins
    first = np.full((2, size), -1, dtype=np.int64)
    pending = np.arange(size)
    while pending.size:
        u = rng.random((pending.size, chunk)) * bins
        cell = np.minimum(u.astype(np.int64), bins - 1)
        offset = u - cell
        for side, width in enumerate((q, p)):
            hit = offset < width[cell]
            todo = (first[side, pending] < 0) & hit.any(axis=1)
            rows = pending[todo]
            first[side, rows] = cell[todo, np.argmax(hit[todo], axis=1)]
        pending = pending[(first[:, pending] < 0).any(axis=0)]
    return first[0], first[1]
