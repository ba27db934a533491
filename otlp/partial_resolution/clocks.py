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
from otlp.solvers.arrays import FloatArray, IntArray
from otlp.solvers.partial_resolution import (
    accepted_mass,
    clock_pieces,
    clock_winner,
    cover_coefficient,
    token_totals,
)
from otlp.solvers.partial_resolution_row import accepted_targets_kernel


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
    (:func:`otlp.solvers.partial_resolution_row.accepted_targets_kernel`) serves this object API
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

    def _later(self, token: int, u: float) -> float:
        """P(a clock of ``token`` is after u): G_token(u) / |I_token| with
        G_token(u) = |I_token ∩ (u, 1]|; a set of length 0 (a subnormal q) holds its clock at
        one point, where :meth:`race` puts it (its last end; none: never)."""
        a, b = self.first[token], self.last[token]
        length = float(self.lengths[token])
        if not length > 0:
            return 1.0 if (self.ends[b - 1] if b > a else 2.0) > u else 0.0
        after = np.maximum(self.ends[a:b] - np.maximum(self.starts[a:b], u), 0.0).sum()
        return float(after) / length

    def race_accepted(self, drafts: ArrayLike) -> tuple[NDArray[np.int64], FloatArray]:
        """``(members, shares)``: the probability that the clock race on the drafted tuple
        ``drafts`` (local ids, any order) emits each distinct member (Lemma 6 of
        docs/partial-resolution.md).

        Given the tuple, draw j's clock is uniform on I_{x_j}; with m_y the multiplicity of
        y and g_y(u) = |I_y ∩ (u, 1]| / |I_y| the chance that one clock of y is after u, x
        wins on a piece [a, b] of I_x below the cut with probability
        (g_x(a)^{m_x} - g_x(b)^{m_x}) Π_{y ≠ x} g_y(a)^{m_y}: the other tokens' g is constant
        on the piece, x's falls at unit speed. It depends on the multiset only; averaged over
        the multisets of a set it is the set's accepted flow (Lemma 5). A token whose set has
        length 0 (a subnormal q) races from one point, as :meth:`race` draws it."""
        members, counts = np.unique(np.asarray(drafts, dtype=np.int64), return_counts=True)
        shares = np.zeros(members.shape[0])

        def others_later(i: int, u: float) -> float:
            out = 1.0
            for j, y in enumerate(members):
                if j != i:
                    out *= self._later(int(y), u) ** int(counts[j])
            return out

        for i, x in enumerate(members):
            if self.accepted[x] == 0:
                continue  # A(x) = 0: past the cut, it wins only by rounding
            m = int(counts[i])
            length = float(self.lengths[x])
            if not length > 0:
                point = self.ends[self.last[x] - 1] if self.last[x] > self.first[x] else 2.0
                shares[i] = others_later(i, point) if point < self.cut else 0.0
                continue
            for a, b in self.pieces(int(x)):
                end = min(b, self.cut)
                if not end > a:
                    continue
                g_a, g_b = self._later(int(x), a), self._later(int(x), end)
                # g_a^m - g_b^m as (g_a - g_b) times positive terms: nothing cancels
                powers = sum(g_a ** (m - 1 - t) * g_b**t for t in range(m))
                shares[i] += (end - a) / length * powers * others_later(i, a)
        return members, shares

    def race_conditional(self, drafts: ArrayLike) -> FloatArray:
        """The decoder's law given the drafted tuple (the race, then the residual) over the
        draft vocabulary plus the outside row (length k + 1)."""
        members, shares = self.race_accepted(drafts)
        out = self.residual_law * max(1.0 - float(shares.sum()), 0.0)
        out[members] += shares
        return out

    def set_conditional(self, members: ArrayLike) -> FloatArray:
        """pi(. | S) over the draft vocabulary plus the outside row (length k + 1)."""
        members = np.asarray(members, dtype=np.int64)
        shares, _ = self.set_accepted(members)
        out = self.residual_law * max(1.0 - float(shares.sum()), 0.0)
        out[members] += shares
        return out
