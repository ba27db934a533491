"""H* and the outer targets for two independent drafts without max-flow ([GR] §6, App. S).

Two drafts, one token each from q1 and q2, target p over the draft vocabulary:
psi(H) = p(H) - q1(H) q2(H) is submodular and alpha* = 1 + min psi ([GR] Theorem 3.1).
Everything here rests on one identity. For a base set G with A = q1(G), B = q2(G),

    psi(G ∪ X) - psi(G) = c(X) - q1(X) q2(X),   c_j = p_j - A q2_j - B q1_j   (X ∩ G = ∅)
    psi(G \\ Y) - psi(G) = -c(Y) - q1(Y) q2(Y)                                   (Y ⊆ G)

and for a general H = (G \\ Y) ∪ X the cross terms only help:
psi(H) - psi(G) >= [c(X) - q1(X) q2(X)] + [-c(Y) - q1(Y) q2(Y)].

The chain checks ask "is f(X) = w(X) - q1(X) q2(X) >= 0 for all X ⊆ S?", answered by
:func:`certify`: a token of a minimiser X' of f over subsets of S satisfies
w_j <= q1_j q2(X') + q2_j q1(X') - q1_j q2_j <= q1_j q2(S) + q2_j q1(S) - q1_j q2_j,
so tokens that violate this can be dropped from S, repeatedly; what remains is enumerated
(Gray code) when small, else bounded by q1(X) q2(X) <= (q1(X) q2(S) + q2(X) q1(S)) / 2,
else minimised by the branch and bound below (f has the form of psi with w for p).
The answer is "certified", "refuted" (with the violating X) or "unknown", never a false
"certified".

* H* (:func:`minimise_psi`). A minimiser H is a half-plane set: with (a, b) = (q1(H), q2(H)),
  j ∈ H needs p_j <= q1_j b + q2_j a - q1_j q2_j and j ∉ H needs p_j >= q1_j b + q2_j a +
  q1_j q2_j (single-token moves do not help). An incumbent comes from iterating the monotone
  map T(H) = {j : p_j < q1_j q2(H) + q2_j q1(H)} from the whole vocabulary (its greatest
  fixed point) and exact single-token moves; then branch and bound over boxes of the
  (a, b) square proves it optimal: in a box every minimiser lies between the sets L and U
  of the box's low and high corners, its (a, b) must be consistent with them, and
  psi(L ∪ X) over X ⊆ U \\ L is bounded below by the inequality above with
  q1(X) q2(X) <= (q1(X) Q2 + q2(X) Q1) / 2 (Q the box's room left for X). A box that cannot
  hold a better set is dropped, a box with few undecided tokens is enumerated, any other
  is split in four; a box still undecided after MAX_DEPTH halvings (exact ties) is settled
  by its linear minimiser when that lies within PSI_TOL of the box's bound. A search that
  exceeds its box budget reports "not certified".
* Outer targets (:func:`independent_outer`): from the whole vocabulary down to H*, remove the
  token with the smallest r_v(H) = (q1_v q2(H) + q2_v q1(H)) / p_v. The chain is *good* (every
  min over supersets of H_i is the cumulative minimum of psi along it, so Theorem 6.2's targets
  and tight-set blocks follow as for i.i.d. drafts) when, with C *closed* meaning
  psi(C) = min over T ⊇ C of psi(T): a step that does not raise psi from a closed set lands on
  a closed set (submodularity), and a run of rising steps R from a closed record G_a to the
  next record G_b is good iff min over S ⊆ R of psi(G_a \\ S) >= psi(G_a) and
  min over U ⊆ R of psi(G_b ∪ U) >= psi(G_b) — both questions for :func:`certify`. If one
  is not certified the caller solves the outer system by max-flow.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from otlp.solvers.arrays import BoolArray, FloatArray, IntArray

CERTIFIED, REFUTED, UNKNOWN = 0, 1, 2
GRAY_MAX = 16  # enumerate the 2^m subsets of what elimination leaves when m <= GRAY_MAX
PSI_TOL = 1e-14  # f(X) >= -PSI_TOL counts as nonnegative (rounding of sums of ~k terms)
MAX_BOXES = 4096  # branch-and-bound budget of the H* search (then: not certified)
MAX_DEPTH = 48  # box halvings before a box counts as unresolvable
ENUMERATE_MAX = 12  # a box with at most this many undecided tokens is enumerated
BOX_EPS = 1e-15  # slack on the sandwich tests (rounding of q1_j b + q2_j a)


@nb.njit(cache=True)
def certify(
    w: FloatArray, q1: FloatArray, q2: FloatArray, candidates: IntArray, tol: float
) -> tuple[int, IntArray]:
    """Is f(X) = w(X) - q1(X) q2(X) >= -tol for every X ⊆ ``candidates``?

    Returns (CERTIFIED | REFUTED | UNKNOWN, X): X (token ids) has f(X) < -tol when REFUTED,
    else it is empty. ``w``, ``q1``, ``q2`` are indexed by token id.
    """
    live = candidates.copy()
    m = live.shape[0]
    while m > 0:  # drop tokens that no minimiser over subsets of live can hold
        s1, s2 = 0.0, 0.0
        for t in range(m):
            s1 += q1[live[t]]
            s2 += q2[live[t]]
        kept = 0
        for t in range(m):
            j = live[t]
            if w[j] <= q1[j] * s2 + q2[j] * s1 - q1[j] * q2[j] + tol:
                live[kept] = j
                kept += 1
        if kept == m:
            break
        m = kept
    empty = np.empty(0, dtype=np.int64)
    if m == 0:
        return CERTIFIED, empty
    live = live[:m]
    if m <= GRAY_MAX:
        inside = np.zeros(m, dtype=np.bool_)
        best_mask = np.zeros(m, dtype=np.bool_)
        sw, s1, s2 = 0.0, 0.0, 0.0
        best = 0.0
        for step in range(1, 1 << m):
            bit = 0  # the Gray code flips the lowest set bit of step
            while not (step >> bit) & 1:
                bit += 1
            j = live[bit]
            sign = -1.0 if inside[bit] else 1.0
            inside[bit] = not inside[bit]
            sw += sign * w[j]
            s1 += sign * q1[j]
            s2 += sign * q2[j]
            value = sw - s1 * s2
            if value < best:
                best = value
                best_mask[:] = inside
        if best >= -tol:
            return CERTIFIED, empty
        return REFUTED, live[best_mask]
    s1, s2 = 0.0, 0.0
    for t in range(m):
        s1 += q1[live[t]]
        s2 += q2[live[t]]
    bounded = True
    for t in range(m):
        j = live[t]
        if w[j] < 0.5 * (q1[j] * s2 + q2[j] * s1) - tol:
            bounded = False
            break
    if bounded:
        return CERTIFIED, empty
    # f has the form of psi itself (w in place of p): the branch and bound of minimise_psi
    certified, inside, value = minimise_psi(w[live], q1[live], q2[live])
    if not certified:
        return UNKNOWN, empty
    if value >= -tol:
        return CERTIFIED, empty
    return REFUTED, live[inside]


@nb.njit(cache=True)
def psi_of(p: FloatArray, q1: FloatArray, q2: FloatArray, mask: BoolArray) -> float:
    """psi(H) = p(H) - q1(H) q2(H) for a mask over the draft vocabulary."""
    sp, s1, s2 = 0.0, 0.0, 0.0
    for j in range(p.shape[0]):
        if mask[j]:
            sp += p[j]
            s1 += q1[j]
            s2 += q2[j]
    return sp - s1 * s2


@nb.njit(cache=True)
def _sums(q1: FloatArray, q2: FloatArray, mask: BoolArray) -> tuple[float, float]:
    s1, s2 = 0.0, 0.0
    for j in range(q1.shape[0]):
        if mask[j]:
            s1 += q1[j]
            s2 += q2[j]
    return s1, s2


@nb.njit(cache=True)
def _greatest_fixed_point(p: FloatArray, q1: FloatArray, q2: FloatArray) -> BoolArray:
    """Iterate T(H) = {j : p_j < q1_j q2(H) + q2_j q1(H)} from the whole vocabulary."""
    k = p.shape[0]
    mask = np.ones(k, dtype=np.bool_)
    for _ in range(k + 1):
        s1, s2 = _sums(q1, q2, mask)
        changed = False
        for j in range(k):
            keep = p[j] < q1[j] * s2 + q2[j] * s1
            if mask[j] and not keep:
                mask[j] = False
                changed = True
        if not changed:
            break
    return mask


@nb.njit(cache=True)
def _local_search(p: FloatArray, q1: FloatArray, q2: FloatArray, mask: BoolArray) -> None:
    """Best single-token moves (exact marginals) while one lowers psi by more than rounding."""
    k = p.shape[0]
    for _ in range(4 * k + 4):
        s1, s2 = _sums(q1, q2, mask)
        best, pick = -PSI_TOL, -1
        for j in range(k):
            cross = q1[j] * s2 + q2[j] * s1
            if mask[j]:  # remove j
                delta = -p[j] + cross - q1[j] * q2[j]
            else:  # add j
                delta = p[j] - cross - q1[j] * q2[j]
            if delta < best:
                best, pick = delta, j
        if pick < 0:
            return
        mask[pick] = not mask[pick]


@nb.njit(cache=True)
def _split(mask: BoolArray, inside: bool) -> IntArray:
    count = 0
    for j in range(mask.shape[0]):
        count += mask[j] == inside
    out = np.empty(count, dtype=np.int64)
    t = 0
    for j in range(mask.shape[0]):
        if mask[j] == inside:
            out[t] = j
            t += 1
    return out


@nb.njit(cache=True)
def _box_bound(
    p: FloatArray,
    q1: FloatArray,
    q2: FloatArray,
    a_lo: float,
    a_hi: float,
    b_lo: float,
    b_hi: float,
    work: IntArray,
) -> tuple[int, float, float, float, float, int]:
    """Sandwich the minimisers whose (q1(H), q2(H)) lies in the box and bound psi there.

    A minimiser H has p_j <= q1_j b + q2_j a - q1_j q2_j for j ∈ H and
    p_j >= q1_j b + q2_j a + q1_j q2_j for j ∉ H ((a, b) = (q1(H), q2(H))), so
    L ⊆ H ⊆ U with L, U from the box's low and high corners. Returns (|D|, psi(L) lower bound
    over L ∪ X for X ⊆ D = U \\ L, q1(L), q2(L), p(L), feasible) with D's ids in ``work``.
    """
    k = p.shape[0]
    pl, l1, l2 = 0.0, 0.0, 0.0
    u1, u2 = 0.0, 0.0
    size = 0
    conflict = False
    for j in range(k):
        prod = q1[j] * q2[j]
        in_low = p[j] < q1[j] * b_lo + q2[j] * a_lo + prod - BOX_EPS
        in_high = p[j] <= q1[j] * b_hi + q2[j] * a_hi - prod + BOX_EPS
        if in_low:
            pl += p[j]
            l1 += q1[j]
            l2 += q2[j]
        conflict = conflict or (in_low and not in_high)
        if in_high or in_low:
            u1 += q1[j]
            u2 += q2[j]
        if in_high and not in_low:
            work[size] = j
            size += 1
    feasible = not conflict and l1 <= a_hi + BOX_EPS and u1 >= a_lo - BOX_EPS
    feasible = feasible and l2 <= b_hi + BOX_EPS and u2 >= b_lo - BOX_EPS
    cap1 = min(u1 - l1, a_hi - l1)
    cap2 = min(u2 - l2, b_hi - l2)
    bound = pl - l1 * l2
    for t in range(size):
        j = work[t]
        c = p[j] - l1 * q2[j] - l2 * q1[j]
        bound += min(0.0, c - 0.5 * (q1[j] * max(cap2, 0.0) + q2[j] * max(cap1, 0.0)))
    return size, bound, l1, l2, pl, feasible


@nb.njit(cache=True)
def _enumerate(
    p: FloatArray, q1: FloatArray, q2: FloatArray, ids: IntArray, pl: float, l1: float, l2: float
) -> tuple[float, IntArray]:
    """min over X ⊆ ids of psi(L ∪ X) (L given by its sums) and its X, by Gray code."""
    m = ids.shape[0]
    inside = np.zeros(m, dtype=np.bool_)
    best_mask = np.zeros(m, dtype=np.bool_)
    sp, s1, s2 = pl, l1, l2
    best = sp - s1 * s2
    for step in range(1, 1 << m):
        bit = 0
        while not (step >> bit) & 1:
            bit += 1
        j = ids[bit]
        sign = -1.0 if inside[bit] else 1.0
        inside[bit] = not inside[bit]
        sp += sign * p[j]
        s1 += sign * q1[j]
        s2 += sign * q2[j]
        value = sp - s1 * s2
        if value < best:
            best = value
            best_mask[:] = inside
    return best, ids[best_mask]


@nb.njit(cache=True)
def _low_set(p: FloatArray, q1: FloatArray, q2: FloatArray, a: float, b: float) -> BoolArray:
    mask = np.zeros(p.shape[0], dtype=np.bool_)
    for j in range(p.shape[0]):
        mask[j] = p[j] < q1[j] * b + q2[j] * a + q1[j] * q2[j] - BOX_EPS
    return mask


@nb.njit(cache=True)
def minimise_psi(p: FloatArray, q1: FloatArray, q2: FloatArray) -> tuple[bool, BoolArray, float]:
    """(certified, H mask, psi(H)): a minimiser of psi up to PSI_TOL, certified by
    branch and bound over the (q1(H), q2(H)) square; certified = False when the box budget
    runs out (the caller then uses the exact min cut).

    ``p`` is the target over the draft vocabulary (not renormalised), ``q1``/``q2`` the two
    drafts there (each summing to one).
    """
    k = p.shape[0]
    mask = _greatest_fixed_point(p, q1, q2)
    _local_search(p, q1, q2, mask)
    best = psi_of(p, q1, q2, mask)
    if best > 0.0:
        mask[:] = False
        best = 0.0
    work = np.empty(k, dtype=np.int64)
    stack = np.empty((4 * MAX_DEPTH + 8, 5))
    stack[0] = (0.0, 1.0, 0.0, 1.0, 0.0)
    top = 1
    boxes = 0
    while top > 0:
        top -= 1
        a_lo, a_hi, b_lo, b_hi, depth = stack[top]
        boxes += 1
        if boxes > MAX_BOXES:
            return False, mask, best
        size, bound, l1, l2, pl, feasible = _box_bound(p, q1, q2, a_lo, a_hi, b_lo, b_hi, work)
        if not feasible or bound >= best - PSI_TOL:
            continue
        if size <= ENUMERATE_MAX:
            value, xs = _enumerate(p, q1, q2, work[:size].copy(), pl, l1, l2)
            if value < best - PSI_TOL:
                mask = _low_set(p, q1, q2, a_lo, b_lo)
                mask[xs] = True
                _local_search(p, q1, q2, mask)
                best = psi_of(p, q1, q2, mask)
            continue
        if depth >= MAX_DEPTH:  # ties: take the linear minimiser, certified up to PSI_TOL
            candidate = _low_set(p, q1, q2, a_lo, b_lo)
            for t in range(size):
                j = work[t]
                c = p[j] - l1 * q2[j] - l2 * q1[j]
                candidate[j] = c < 0.0
            value = psi_of(p, q1, q2, candidate)
            if value < best:
                mask, best = candidate, value
            if value > bound + PSI_TOL:
                return False, mask, best
            continue
        a_mid, b_mid = 0.5 * (a_lo + a_hi), 0.5 * (b_lo + b_hi)
        stack[top] = (a_lo, a_mid, b_lo, b_mid, depth + 1)
        stack[top + 1] = (a_mid, a_hi, b_lo, b_mid, depth + 1)
        stack[top + 2] = (a_lo, a_mid, b_mid, b_hi, depth + 1)
        stack[top + 3] = (a_mid, a_hi, b_mid, b_hi, depth + 1)
        top += 4
    return True, mask, best


@nb.njit(cache=True)
def removal_order(p: FloatArray, q1: FloatArray, q2: FloatArray, inside: BoolArray) -> IntArray:
    """The tokens outside H* in removal order v_1..v_K: each step removes the remaining one
    with the smallest r_v(H) = (q1_v q2(H) + q2_v q1(H)) / p_v (p_v = 0 last)."""
    outside = _split(inside, False)
    count = outside.shape[0]
    u = np.empty(count)  # q1/p and q2/p: the inner loop is two multiplications and an add
    v = np.empty(count)
    for t in range(count):
        j = outside[t]
        u[t] = q1[j] / p[j] if p[j] > 0 else np.inf
        v[t] = q2[j] / p[j] if p[j] > 0 else np.inf
    s1, s2 = 0.0, 0.0
    for j in range(p.shape[0]):
        s1 += q1[j]
        s2 += q2[j]
    order = np.empty(count, dtype=np.int64)
    for step in range(count):
        pick, best = step, np.inf
        for t in range(step, count):
            r = u[t] * s2 + v[t] * s1
            if r < best:
                pick, best = t, r
        if best == np.inf:  # only p = 0 tokens (or inf ratios) left: keep their order
            pick = step
        j = outside[pick]
        order[step] = j
        s1 = max(s1 - q1[j], 0.0)
        s2 = max(s2 - q2[j], 0.0)
        outside[pick], outside[step] = outside[step], outside[pick]
        u[pick], u[step] = u[step], u[pick]
        v[pick], v[step] = v[step], v[pick]
    return order


@nb.njit(cache=True)
def chain_psi(
    p: FloatArray, q1: FloatArray, q2: FloatArray, inside: BoolArray, order: IntArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """psi, q1 and q2 of H_i = H* ∪ {v_i..v_K} for i = 1..K+1 (0-based: index 0 is the whole
    vocabulary, index K is H*), from suffix sums over the order (no cancellation)."""
    count = order.shape[0]
    sp, s1, s2 = 0.0, 0.0, 0.0
    for j in range(p.shape[0]):
        if inside[j]:
            sp += p[j]
            s1 += q1[j]
            s2 += q2[j]
    psi = np.empty(count + 1)
    a = np.empty(count + 1)
    b = np.empty(count + 1)
    psi[count], a[count], b[count] = sp - s1 * s2, s1, s2
    for i in range(count - 1, -1, -1):
        j = order[i]
        sp += p[j]
        s1 += q1[j]
        s2 += q2[j]
        psi[i], a[i], b[i] = sp - s1 * s2, s1, s2
    return psi, a, b


@nb.njit(cache=True)
def certify_chain(
    p: FloatArray,
    q1: FloatArray,
    q2: FloatArray,
    order: IntArray,
    psi: FloatArray,
    a: FloatArray,
    b: FloatArray,
) -> bool:
    """Whether the chain is good: every run of rising steps between records passes both
    phase checks (see the module docstring)."""
    count = order.shape[0]
    w = np.empty(p.shape[0])
    record = 0  # index of the last record (a closed set); H_0, the whole vocabulary, is one
    for i in range(1, count + 1):
        if psi[i] > psi[record]:
            continue  # a rising step: part of the current phase
        if i > record + 1:  # a phase of rising steps R = order[record : i - 1], then v_b
            rising = order[record : i - 1]
            for t in range(rising.shape[0]):  # psi(G_a \\ S) - psi(G_a) = w(S) - q1 q2 (S)
                j = rising[t]
                w[j] = a[record] * q2[j] + b[record] * q1[j] - p[j]
            status, _ = certify(w, q1, q2, rising, PSI_TOL)
            if status != CERTIFIED:
                return False
            for t in range(rising.shape[0]):  # psi(G_b ∪ U) - psi(G_b) = w(U) - q1 q2 (U)
                j = rising[t]
                w[j] = p[j] - a[i] * q2[j] - b[i] * q1[j]
            status, _ = certify(w, q1, q2, rising, PSI_TOL)
            if status != CERTIFIED:
                return False
        record = i
    return True


@nb.njit(cache=True)
def independent_outer(
    p: FloatArray, q1: FloatArray, q2: FloatArray, inside: BoolArray
) -> tuple[bool, IntArray, FloatArray]:
    """(certified, removal order v_1..v_K, psi along the chain) for H* = ``inside``; with
    certified, Theorem 6.2's targets are p(v_i) + m_{i+1} - m_i with m the cumulative
    minimum of psi (:func:`chain_blocks`)."""
    order = removal_order(p, q1, q2, inside)
    psi, a, b = chain_psi(p, q1, q2, inside, order)
    return certify_chain(p, q1, q2, order, psi, a, b), order, psi


@nb.njit(cache=True)
def chain_blocks(
    order: IntArray, p_order: FloatArray, psi: FloatArray, k: int
) -> tuple[FloatArray, IntArray, IntArray, IntArray]:
    """Theorem 6.2 targets and tight-set blocks along a good chain ([GR] §6.1).

    ``psi[i]`` is psi(H* ∪ {v_{i+1}..v_K}) (0-based; ``psi[K]`` = psi(H*)); a record of the
    cumulative minimum after v_i makes {v_1..v_i} tight and ends a block. Returns (targets,
    block starts, block ends, block of each of the k tokens, -1 inside H*).
    """
    count = order.shape[0]
    targets = np.empty(count)
    is_end = np.zeros(count, dtype=np.bool_)
    low = psi[0]
    for i in range(count):
        new_low = min(low, psi[i + 1])
        targets[i] = max(p_order[i] + new_low - low, 0.0)
        is_end[i] = psi[i + 1] <= new_low
        low = new_low
    if count:
        is_end[count - 1] = True
    blocks = 0
    for i in range(count):
        blocks += is_end[i]
    starts = np.empty(blocks, dtype=np.int64)
    ends = np.empty(blocks, dtype=np.int64)
    block_of = np.full(k, -1, dtype=np.int64)
    block, begin = 0, 0
    for i in range(count):
        block_of[order[i]] = block
        if is_end[i]:
            starts[block], ends[block] = begin, i + 1
            block, begin = block + 1, i + 1
    return targets, starts, ends, block_of
