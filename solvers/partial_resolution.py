"""Kernels of partial resolution: an exact optimal transport plan per token for n i.i.d. drafts.

Numeric only (arrays in, arrays out); :mod:`otlp.partial_resolution` builds the inputs from an
instance and documents the derivation (docs/partial-resolution.md). The reference is "Partial
Resolution: Optimal Multi-Draft Speculative Sampling in Near-Linear Time" (R. Thomas and
A. Pal, NeurIPS 2025; only its abstract is public, the construction here is otlp's own) and
[GR] (max-flow, polymatroid outer targets).

The plan is a *clock* plan. The line [0, 1] carries the weight ``w(u) = n (1 - u)^(n-1)`` on
``[0, cut)`` and 0 on ``[cut, 1]``, with ``1 - (1 - cut)^n = alpha*``. Every draft token x
owns a set ``I_x`` (a few intervals) of length q(x) and weight A(x), its accepted mass; the
sets partition [0, 1]. Each draw gets a clock uniform on its token's set (so the n clocks are
i.i.d. uniform on [0, 1]); the earliest clock wins; below ``cut`` its token is emitted,
otherwise the step samples the residual ``p - A``.

* :func:`clock_pieces` builds the sets by *gap filling* (Lemma 3 of the docs page).
* :func:`accepted_mass` is a drawn set's accepted flow ``a(S, .)`` (Lemma 5), a sum of
  positive terms (no inclusion-exclusion, nothing cancels).
* :func:`cover_coefficient` is ``P(set(omega) = S) / n!`` for i.i.d. draws, also by positive
  terms.
* :func:`clock_winner` is the decoder's draw (Lemma 4).
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

BISECTIONS = 200  # more than enough to pin a float64 position (stops when it stops moving)


@nb.njit(cache=True)
def weight_between(a: float, b: float, cut: float, n: int) -> float:
    """The weight of [a, b] (a <= b): ``(1 - min(a, cut))^n - (1 - min(b, cut))^n``."""
    ta = 1.0 - min(a, cut)
    tb = 1.0 - min(b, cut)
    if ta <= tb:
        return 0.0
    # (ta - tb) * sum ta^(n-1-i) tb^i: positive terms, no cancellation between the powers,
    # summed from the largest (ta > tb): starting from tb^(n-1) lost every digit once it was
    # subnormal or 0 (tb = 3.6e-6, n = 60 or 100: weights of 1.006 or 0 for a true 0.99996)
    total = 0.0
    term = ta ** (n - 1)
    ratio = tb / ta
    for _ in range(n):
        total += term
        term *= ratio
        if term == 0.0:
            break
    return (ta - tb) * total


@nb.njit(cache=True)
def _free_weight(
    c: float,
    starts: FloatArray,
    ends: FloatArray,
    cum_len: FloatArray,
    cum_w: FloatArray,
    count: int,
    cut: float,
    n: int,
) -> float:
    """Weight of the first ``c`` units of the free space (compressed coordinate)."""
    i = np.searchsorted(cum_len[1 : count + 1], c, side="right")
    if i >= count:
        return cum_w[count]
    real = min(starts[i] + (c - cum_len[i]), ends[i])
    return cum_w[i] + weight_between(starts[i], real, cut, n)


@nb.njit(cache=True)
def _density(u: float, cut: float, n: int) -> float:
    """w(u) = n (1 - u)^(n-1) below the cut, 0 from it on."""
    return n * (1.0 - u) ** (n - 1) if u < cut else 0.0


@nb.njit(cache=True)
def _stretch_weight(
    c: float,
    width: float,
    i: int,
    j: int,
    starts: FloatArray,
    cum_len: FloatArray,
    cum_w: FloatArray,
    cut: float,
    n: int,
) -> float:
    """Weight of the free stretch [c, c + width] (compressed) when c lies in free interval i
    and c + width in free interval j."""
    left = cum_w[i] + weight_between(starts[i], starts[i] + (c - cum_len[i]), cut, n)
    right_end = starts[j] + (c + width - cum_len[j])
    right = cum_w[j] + weight_between(starts[j], right_end, cut, n)
    return right - left


@nb.njit(cache=True)
def _solve_stretch(
    lo: float,
    hi: float,
    width: float,
    target: float,
    starts: FloatArray,
    ends: FloatArray,
    cum_len: FloatArray,
    cum_w: FloatArray,
    count: int,
    cut: float,
    n: int,
) -> float:
    """The c in (lo, hi) where the free stretch [c, c + width] weighs ``target`` (its weight
    is non-increasing in c, above ``target`` at lo and at most ``target`` at hi).

    First a binary search over the breakpoints (c or c + width at a free interval's end),
    then, with both ends in fixed intervals, safeguarded Newton steps on a smooth function."""
    # breakpoints in (lo, hi): cum_len[i] and cum_len[i] - width, merged by binary search
    a, b = lo, hi
    for shift in (0.0, width):
        left, right = 0, count
        while left <= right:  # bisect over i on the breakpoints cum_len[i] - shift
            mid = (left + right) // 2
            point = cum_len[mid] - shift
            if point <= a:
                left = mid + 1
            elif point >= b:
                right = mid - 1
            else:
                got = _free_weight(point + width, starts, ends, cum_len, cum_w, count, cut, n)
                got -= _free_weight(point, starts, ends, cum_len, cum_w, count, cut, n)
                if got > target:
                    a = point
                    left = mid + 1
                else:
                    b = point
                    right = mid - 1
    middle = 0.5 * (a + b)
    i = min(int(np.searchsorted(cum_len[1 : count + 1], middle, side="right")), count - 1)
    found = np.searchsorted(cum_len[1 : count + 1], middle + width, side="right")
    j = min(int(found), count - 1)
    x = middle
    for _ in range(BISECTIONS):
        g = _stretch_weight(x, width, i, j, starts, cum_len, cum_w, cut, n) - target
        if g > 0:
            a = x
        else:
            b = x
        if g == 0.0:
            break
        slope = _density(starts[j] + (x + width - cum_len[j]), cut, n) - _density(
            starts[i] + (x - cum_len[i]), cut, n
        )
        step = x - g / slope if slope < 0 else 0.5 * (a + b)
        if not (a < step < b):
            step = 0.5 * (a + b)
        if abs(step - x) <= 1e-17 or b - a <= 0.0:
            x = step
            break
        x = step
    return x


@nb.njit(cache=True)
def clock_pieces(
    q: FloatArray,
    accepted: FloatArray,
    order: IntArray,
    segment_ends: IntArray,
    n: int,
    cut: float,
) -> tuple[FloatArray, FloatArray, IntArray, IntArray]:
    """The sets ``I_x`` of every token by gap filling: :func:`clock_pieces_until` run to the
    end of every segment."""
    return clock_pieces_until(q, accepted, order, segment_ends, segment_ends, n, cut)


@nb.njit(cache=True)
def clock_pieces_until(
    q: FloatArray,
    accepted: FloatArray,
    order: IntArray,
    segment_ends: IntArray,
    stops: IntArray,
    n: int,
    cut: float,
) -> tuple[FloatArray, FloatArray, IntArray, IntArray]:
    """The sets ``I_x`` by gap filling: ``(starts, ends, first, last)``.

    Tokens are taken in ``order``; ``segment_ends`` cuts ``order`` into segments (the tight
    chain of [GR] Theorem 6.2's blocks, then H*), segment j owning the stretch of [0, 1] after
    the earlier segments' draft mass. Within a segment each token takes the stretch
    ``[c, c + q(x)]`` of the still-free part (compressed coordinate) whose weight is
    ``accepted[x]`` (the weight is non-increasing in c: bisection); the segment's last token
    takes what is left. Token x's pieces are ``starts[first[x]:last[x]]`` to
    ``ends[first[x]:last[x]]``, in increasing position.

    Segment j is filled only up to ``order[stops[j] - 1]`` (``stops[j]`` between its start
    and ``segment_ends[j]``): a token's set depends only on the tokens before it in its own
    segment (Lemma 3 fills in order, segments own disjoint stretches), so a decoder row fills
    only as far as its drafted tokens; the tokens after a stop get no pieces.
    """
    k = q.shape[0]
    cap = 4 * k + 4
    p_start = np.empty(cap)
    p_end = np.empty(cap)
    first = np.zeros(k, dtype=np.int64)
    last = np.zeros(k, dtype=np.int64)
    pieces = 0
    free_s = np.empty(2 * k + 2)
    free_e = np.empty(2 * k + 2)
    new_s = np.empty(2 * k + 2)
    new_e = np.empty(2 * k + 2)
    cum_len = np.empty(2 * k + 3)
    cum_w = np.empty(2 * k + 3)
    line = 0.0
    begin = 0
    for seg in range(segment_ends.shape[0]):
        end = segment_ends[seg]
        length = 0.0
        for t in range(begin, end):
            length += q[order[t]]
        count = 1
        free_s[0] = line
        free_e[0] = line + length
        line += length
        for t in range(begin, min(max(stops[seg], begin), end)):
            x = order[t]
            # prefix lengths and weights of the free intervals
            cum_len[0] = 0.0
            cum_w[0] = 0.0
            for i in range(count):
                cum_len[i + 1] = cum_len[i] + (free_e[i] - free_s[i])
                cum_w[i + 1] = cum_w[i] + weight_between(free_s[i], free_e[i], cut, n)
            total = cum_len[count]
            width = min(q[x], total)
            if t == end - 1:
                lo_c = 0.0
                width = total
            else:
                lo, hi = 0.0, total - width
                target = accepted[x]
                w_lo = _free_weight(lo + width, free_s, free_e, cum_len, cum_w, count, cut, n)
                w_hi = _free_weight(hi + width, free_s, free_e, cum_len, cum_w, count, cut, n)
                w_hi -= _free_weight(hi, free_s, free_e, cum_len, cum_w, count, cut, n)
                if w_lo <= target:
                    lo_c = lo
                elif w_hi >= target:
                    lo_c = hi
                else:
                    lo_c = _solve_stretch(
                        lo, hi, width, target, free_s, free_e, cum_len, cum_w, count, cut, n
                    )
            hi_c = lo_c + width
            # carve [lo_c, hi_c] (compressed) out of the free intervals
            first[x] = pieces
            kept = 0
            for i in range(count):
                a_c, b_c = cum_len[i], cum_len[i + 1]
                s, e = free_s[i], free_e[i]
                if b_c <= lo_c or a_c >= hi_c or e <= s:
                    if e > s:
                        new_s[kept] = s
                        new_e[kept] = e
                        kept += 1
                    continue
                cs = s + max(lo_c - a_c, 0.0) if lo_c > a_c else s
                ce = min(s + (hi_c - a_c), e) if hi_c < b_c else e
                if cs > s:
                    new_s[kept] = s
                    new_e[kept] = cs
                    kept += 1
                if ce > cs:
                    if pieces == p_start.shape[0]:
                        grow_s = np.empty(2 * pieces)
                        grow_e = np.empty(2 * pieces)
                        grow_s[:pieces] = p_start
                        grow_e[:pieces] = p_end
                        p_start, p_end = grow_s, grow_e
                    p_start[pieces] = cs
                    p_end[pieces] = ce
                    pieces += 1
                if e > ce:
                    new_s[kept] = ce
                    new_e[kept] = e
                    kept += 1
            last[x] = pieces
            count = kept
            free_s[:count] = new_s[:count]
            free_e[:count] = new_e[:count]
        begin = end
    return p_start[:pieces].copy(), p_end[:pieces].copy(), first, last


@nb.njit(cache=True)
def _length_after(u: float, starts: FloatArray, ends: FloatArray, lo: int, hi: int) -> float:
    """|I_y ∩ (u, 1]| for the pieces ``lo:hi`` of one token."""
    total = 0.0
    for i in range(lo, hi):
        if ends[i] > u:
            total += ends[i] - max(starts[i], u)
    return total


@nb.njit(cache=True)
def _cover_series(weights: FloatArray, count: int, n: int, skip: int) -> FloatArray:
    """``out[m] = [t^m] prod (e^(g t) - 1)`` over the tokens ``weights[:count]`` but ``skip``,
    m = 0..n: the mass of the m-tuples that use every one of them, divided by m!. All terms
    are positive; without the m! nothing overflows for weights summing to about n / e."""
    coef = np.zeros(n + 1)
    coef[0] = 1.0
    powers = np.empty(n + 1)
    nxt = np.empty(n + 1)
    for y in range(count):
        if y == skip:
            continue
        g = weights[y]
        powers[0] = 1.0
        for j in range(1, n + 1):
            powers[j] = powers[j - 1] * g / j  # g^j / j!
        for m in range(n + 1):
            acc = 0.0
            for j in range(1, m + 1):
                acc += coef[m - j] * powers[j]
            nxt[m] = acc
        coef[:] = nxt
    return coef


@nb.njit(cache=True)
def cover_coefficient(q_set: FloatArray, n: int) -> float:
    """``P(set(omega) = S) / n!`` for n i.i.d. draws, ``q_set`` the draft masses of S."""
    return _cover_series(q_set, q_set.shape[0], n, -1)[n]


@nb.njit(cache=True)
def _power_gap(a: float, b: float, gap: float, m: int) -> float:
    """``(a^m - b^m) / m!`` for a >= b >= 0 with ``a - b = gap``, as
    ``gap * (a^(m-1) / m!) * sum (b / a)^i``: positive terms, no overflow of a^m alone."""
    if a <= 0.0:
        return 0.0
    lead = 1.0
    for i in range(1, m + 1):
        lead *= (a if i < m else 1.0) / i
    ratio = b / a
    total = 0.0
    term = 1.0
    for _ in range(m):
        total += term
        term *= ratio
    return gap * lead * total


@nb.njit(cache=True)
def accepted_mass(
    members: IntArray,
    starts: FloatArray,
    ends: FloatArray,
    first: IntArray,
    last: IntArray,
    n: int,
    cut: float,
    scale: float,
) -> FloatArray:
    """``a(S, x) / (n! scale^n)`` for the tokens x of S = ``members`` (distinct local ids):
    the probability that the drafted set is S and the earliest clock, below ``cut``, is x's.

    On a piece [a, b] of I_x the other tokens' remaining lengths G_y are constant and G_x
    falls at unit speed, so with T = S minus x and Surj_m(T; G) = m! [t^m] prod (e^(G t) - 1),
    ``a(S, x) = sum_pieces sum_j C(n, j+1) Surj_{n-1-j}(T; G(a)) (G_x(a)^(j+1) - G_x(b)^(j+1))``,
    positive terms only; divided by n! each term is
    ``[t^(n-1-j)] prod_T (e^(G t) - 1) * (G_x(a)^(j+1) - G_x(b)^(j+1)) / (j+1)!``. Lengths are
    divided by ``scale`` (about e q(S) / n) so that neither tiny sets underflow nor many
    drafts overflow; the ratio to :func:`cover_coefficient` of the scaled masses is the
    accepted share a(S, x) / Q(S) (both are homogeneous of degree n).
    """
    size = members.shape[0]
    out = np.zeros(size)
    remaining = np.empty(size)
    for ix in range(size):
        x = members[ix]
        total = 0.0
        for piece in range(first[x], last[x]):
            a = starts[piece]
            if a >= cut:
                continue
            b = min(ends[piece], cut)
            if b <= a:
                continue
            for iy in range(size):
                y = members[iy]
                remaining[iy] = _length_after(a, starts, ends, first[y], last[y]) / scale
            series = _cover_series(remaining, size, n, ix)
            g_a = remaining[ix]
            gap = (b - a) / scale
            g_b = max(g_a - gap, 0.0)
            for j in range(n):
                rest = n - 1 - j
                if series[rest] == 0.0:
                    continue
                total += series[rest] * _power_gap(g_a, g_b, gap, j + 1)
        out[ix] = total
    return out


@nb.njit(cache=True)
def clock_of(
    x: int, v: float, starts: FloatArray, ends: FloatArray, first: IntArray, last: IntArray
) -> float:
    """The point of I_x at length ``v`` into it (v uniform on [0, |I_x|): a uniform clock)."""
    for i in range(first[x], last[x]):
        length = ends[i] - starts[i]
        if v < length:
            return starts[i] + v
        v -= length
    return ends[last[x] - 1] if last[x] > first[x] else 2.0


@nb.njit(cache=True)
def clock_winner(
    drafts: IntArray,
    uniforms: FloatArray,
    starts: FloatArray,
    ends: FloatArray,
    first: IntArray,
    last: IntArray,
    cut: float,
) -> int:
    """The index of the winning draw (earliest clock) if its clock is below ``cut``, else -1.

    Draw j's clock is the point ``uniforms[j] * |I_x|`` into the set of its token x."""
    best = 2.0
    winner = -1
    for j in range(drafts.shape[0]):
        x = drafts[j]
        size = 0.0
        for i in range(first[x], last[x]):
            size += ends[i] - starts[i]
        u = clock_of(x, uniforms[j] * size, starts, ends, first, last)
        if u < best:
            best = u
            winner = j
    return winner if best < cut else -1


@nb.njit(cache=True)
def token_totals(
    starts: FloatArray, ends: FloatArray, first: IntArray, last: IntArray, cut: float, n: int
) -> tuple[FloatArray, FloatArray]:
    """``(|I_x|, weight of I_x)`` for every token."""
    k = first.shape[0]
    lengths = np.zeros(k)
    weights = np.zeros(k)
    for x in range(k):
        for i in range(first[x], last[x]):
            lengths[x] += ends[i] - starts[i]
            weights[x] += weight_between(starts[i], ends[i], cut, n)
    return lengths, weights
