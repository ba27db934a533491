"""The clock partition of one step: accepted masses, the cut, and every token's set of [0, 1].

"Partial Resolution: Optimal Multi-Draft Speculative Sampling in Near-Linear Time" (R. Thomas
and A. Pal, NeurIPS 2025) computes the exact optimal transport of n i.i.d. drafts per token;
only its abstract is public. This is otlp's own exact construction (derivation and proofs on
docs/partial-resolution.md): the token side A of an optimal flow comes from [GR] Theorem 6.2
(H* by subset selection, outer targets by the greedy polymatroid algorithm, one sort), and a
partition of [0, 1] into sets I_x with |I_x| = q(x) and weight A(x) turns it into one global
plan whose conditional for a drafted set needs only that set's pieces.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otlp.instance import Instance, require_instance
from otlp.reprs import dataclass_repr
from solvers.partial_resolution import (
    accepted_mass,
    clock_pieces,
    clock_winner,
    cover_coefficient,
    token_totals,
)
from solvers.partial_resolution_row import accepted_targets_kernel

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def cut_point(rejection: float, n: int) -> float:
    """The cut c with ``(1 - c)^n = 1 - alpha*`` from the rejection mass ``1 - alpha* =
    q(H*)^n - p(H*)`` itself (1 - alpha* from a rounded alpha* loses it when it is tiny:
    (1e-79)^(1/16) = 1e-5 is a real stretch of the line, 1 - 1.0 is none)."""
    return float(1.0 - max(rejection, 0.0) ** (1.0 / n))


def accepted_targets(inst: Instance) -> tuple[FloatArray, IntArray, IntArray, float]:
    """``(A, order, segment_ends, 1 - alpha*)`` for an i.i.d. instance.

    A is the token side of an optimal flow: p on H*, the [GR] Theorem 6.2 outer targets
    elsewhere. ``order`` lists the draft vocabulary block by block of the tight chain, then
    H*, each by decreasing q/p (increasing accepted density: any order is exact by Lemma 3;
    this one keeps every token at <= 2-3 pieces and the free list short, where increasing q/p
    leaves holes that the segment's last token collects, ~500 pieces at V = 32,000, and costs
    10-15x more); ``segment_ends`` closes each block and H*. One compiled implementation
    (:func:`solvers.partial_resolution_row.accepted_targets_kernel`) serves this object API
    and the fused decoder row, so both build the same partition.
    """
    return accepted_targets_kernel(inst.p_local, inst.q_local, inst.n)


@dataclass(frozen=True)
class ClockPartition:
    """One step's clock plan over the draft vocabulary (local ids).

    ``accepted[x]`` = A(x); ``starts/ends[first[x]:last[x]]`` are the pieces of I_x; ``cut``
    the point where the weight n (1 - u)^(n - 1) stops; ``alpha_star`` from subset selection.
    """

    n: int
    cut: float
    alpha_star: float
    accepted: FloatArray
    starts: FloatArray
    ends: FloatArray
    first: IntArray
    last: IntArray
    target_rows: FloatArray

    __repr__ = dataclass_repr

    @classmethod
    def of(cls, inst: Instance) -> ClockPartition:
        """The partition for ``inst`` (i.i.d. drafts, or one draft under any scheme)."""
        require_instance(inst)
        if inst.scheme != "iid" and inst.n > 1:
            raise ValueError(
                f"inst: partial resolution is exact for i.i.d. drafts (or n = 1), not scheme "
                f"{inst.scheme!r} with n = {inst.n}; use method='global_resolution'"
            )
        accepted, order, ends, rejection = accepted_targets(inst)
        alpha = 1.0 - rejection
        cut = cut_point(rejection, inst.n)
        starts, stops, first, last = clock_pieces(inst.q_local, accepted, order, ends, inst.n, cut)
        return cls(inst.n, cut, alpha, accepted, starts, stops, first, last, inst.target_rows)

    @cached_property
    def _totals(self) -> tuple[FloatArray, FloatArray]:
        return token_totals(self.starts, self.ends, self.first, self.last, self.cut, self.n)

    @property
    def lengths(self) -> FloatArray:
        """|I_x| per token (q(x) up to rounding)."""
        return self._totals[0]

    @property
    def weights(self) -> FloatArray:
        """The weight of I_x per token: the accepted mass the clock plan realises (A up to
        rounding)."""
        return self._totals[1]

    @cached_property
    def residual_rows(self) -> FloatArray:
        """p - (weight of I_x) over the draft vocabulary plus the outside row, clipped at 0."""
        rows = np.array(self.target_rows, dtype=float)
        rows[:-1] = np.maximum(rows[:-1] - self.weights, 0.0)
        return rows

    @cached_property
    def residual_law(self) -> FloatArray:
        """The residual rows normalised (the rejected step's law); the target if none is left."""
        total = float(self.residual_rows.sum())
        return self.residual_rows / total if total > 0 else self.target_rows

    def pieces(self, token: int) -> FloatArray:
        """The pieces of I_token as rows (start, end)."""
        a, b = self.first[token], self.last[token]
        return np.column_stack([self.starts[a:b], self.ends[a:b]])

    def set_accepted(self, members: ArrayLike) -> tuple[FloatArray, float]:
        """``(a(S, .) / Q(S), Q(S))`` over S = ``members`` (distinct local ids): the shares of
        the set's mass accepted as each member (Lemma 5), and the set's draft mass."""
        members = np.asarray(members, dtype=np.int64)
        lengths = self.lengths[members]
        total = float(lengths.sum())
        # lengths summing to ~n/e keep every coefficient of Lemma 5 near 1 (no under- or
        # overflow up to several hundred drafts)
        scale = total * math.e / self.n if total > 0 else 1.0
        raw = accepted_mass(
            members, self.starts, self.ends, self.first, self.last, self.n, self.cut, scale
        )
        raw[self.accepted[members] == 0] = 0.0  # such a token wins only by rounding at the cut
        coefficient = cover_coefficient(lengths / scale, self.n)
        if not coefficient > 0:
            return np.zeros(members.shape[0]), 0.0
        shares = raw / coefficient
        accepted = float(shares.sum())
        if accepted > 1.0:  # rounding only: the accepted flow never exceeds the set's mass
            shares = shares / accepted
        log_mass = math.log(coefficient) + math.lgamma(self.n + 1) + self.n * math.log(scale)
        return shares, math.exp(log_mass) if log_mass < 709.0 else math.inf

    def race(self, drafts: ArrayLike, uniforms: ArrayLike) -> int:
        """The decoder's draw (Lemma 4): the local id of the token whose clock (``uniforms[j]``
        of the way into I of draw j's token) is earliest, if below ``cut``; -1: reject."""
        drafts = np.asarray(drafts, dtype=np.int64)
        u = np.asarray(uniforms, dtype=np.float64)
        j = clock_winner(drafts, u, self.starts, self.ends, self.first, self.last, self.cut)
        if j < 0 or self.accepted[drafts[j]] == 0:  # A(x) = 0 wins only by rounding at the cut
            return -1
        return int(drafts[j])

    def set_conditional(self, members: ArrayLike) -> FloatArray:
        """pi(. | S) over the draft vocabulary plus the outside row (length k + 1)."""
        members = np.asarray(members, dtype=np.int64)
        shares, _ = self.set_accepted(members)
        out = self.residual_law * max(1.0 - float(shares.sum()), 0.0)
        out[members] += shares
        return out
