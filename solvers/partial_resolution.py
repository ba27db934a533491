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

import math

import numba as nb
import numpy as np

from otlp.solvers.arrays import BoolArray, FloatArray, IntArray

# a stretch's two ends: (start, free length before, free weight before) of each one's interval
StretchEnds = tuple[float, float, float, float, float, float]

BISECTIONS = 200  # more than enough to pin a float64 position (stops when it stops moving)
ROUNDING = 4.0 * float(np.finfo(np.float64).eps)  # a stretch weight's rounding, relative
WALK = 8  # ranges a placement walks through before the binary search over breakpoints
SUMMED_POWERS = 16  # weight_between sums n terms up to this n, above it two transcendentals


@nb.njit(cache=True)
def weight_between(a: float, b: float, cut: float, n: int) -> float:
    """The weight of [a, b] (a <= b): ``(1 - min(a, cut))^n - (1 - min(b, cut))^n``."""
    ta = 1.0 - min(a, cut)
    tb = 1.0 - min(b, cut)
    if ta <= tb:
        return 0.0
    if n > SUMMED_POWERS:
        # ta^n (1 - (tb / ta)^n) with 1 - (tb / ta)^n = -expm1(n log1p(-(ta - tb) / ta)): a few
        # ulps, no cancellation, O(1) where the sum below costs n terms (43 ns at n = 64)
        return ta**n * -math.expm1(n * math.log1p(-(ta - tb) / ta))
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


# The free part of a segment (Lemma 3 of docs/partial-resolution.md) as a treap: a binary
# search tree over the free intervals in position order with pseudo-random heap priorities
# (expected depth O(log m) for m intervals). Node 0 is the empty tree (sums 0). Every subtree
# carries its free length and weight, so a compressed position is found, and the weight before
# it summed, by one descent; carving a stretch is two splits, the run between them, and merges.
_START, _END, _WEIGHT, _LEN_SUM, _WEIGHT_SUM = 0, 1, 2, 3, 4  # float columns of a node
_LEFT, _RIGHT, _PRIORITY = 0, 1, 2  # int columns of a node


@nb.njit(cache=True)
def _new_tree(capacity: int) -> tuple[FloatArray, IntArray]:
    """Node storage ``(values, links)`` for ``capacity`` nodes, node 0 the empty tree; each
    node's priority is a fixed hash of its id (splitmix64), so the shapes are reproducible."""
    values = np.zeros((capacity, 5))
    links = np.zeros((capacity, 3), dtype=np.int64)
    for node in range(capacity):
        z = np.uint64(node) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        links[node, _PRIORITY] = np.int64((z ^ (z >> np.uint64(31))) >> np.uint64(2))
    return values, links


@nb.njit(cache=True)
def _pull(node: int, values: FloatArray, links: IntArray) -> None:
    """Recompute ``node``'s subtree sums (free length and weight) from its children."""
    left, right = links[node, _LEFT], links[node, _RIGHT]
    length = values[node, _END] - values[node, _START]
    values[node, _LEN_SUM] = values[left, _LEN_SUM] + length + values[right, _LEN_SUM]
    weight = values[left, _WEIGHT_SUM] + values[node, _WEIGHT] + values[right, _WEIGHT_SUM]
    values[node, _WEIGHT_SUM] = weight


@nb.njit(cache=True)
def _leaf(
    node: int, start: float, end: float, values: FloatArray, links: IntArray, cut: float, n: int
) -> int:
    """Make ``node`` the one-interval tree [start, end]; returns it."""
    values[node, _START] = start
    values[node, _END] = end
    values[node, _WEIGHT] = weight_between(start, end, cut, n)
    links[node, _LEFT] = 0
    links[node, _RIGHT] = 0
    _pull(node, values, links)
    return node


@nb.njit(cache=True)
def _split(
    root: int, c: float, by_end: bool, values: FloatArray, links: IntArray, stack: IntArray
) -> tuple[int, int]:
    """``(before, after)``: the intervals that end at or before compressed position c
    (``by_end``), or that start before it (otherwise), and the rest; one descent."""
    before, after = 0, 0  # the two roots
    before_tail, after_tail = 0, 0  # the nodes whose right (left) child takes the next one
    depth = 0
    offset = 0.0
    node = root
    while node != 0:
        stack[depth] = node
        depth += 1
        start = offset + values[links[node, _LEFT], _LEN_SUM]
        end = start + (values[node, _END] - values[node, _START])
        if (end <= c) if by_end else (start < c):
            if before_tail == 0:
                before = node
            else:
                links[before_tail, _RIGHT] = node
            before_tail, offset = node, end
            node = links[node, _RIGHT]
        else:
            if after_tail == 0:
                after = node
            else:
                links[after_tail, _LEFT] = node
            after_tail = node
            node = links[node, _LEFT]
    links[before_tail, _RIGHT] = 0  # node 0's links are never read
    links[after_tail, _LEFT] = 0
    for i in range(depth - 1, -1, -1):
        _pull(stack[i], values, links)
    return before, after


@nb.njit(cache=True)
def _merge(first: int, second: int, values: FloatArray, links: IntArray, stack: IntArray) -> int:
    """The tree of ``first``'s intervals followed by ``second``'s (higher priority on top)."""
    root = 0
    tail = 0
    side = _LEFT
    depth = 0
    while first != 0 and second != 0:
        if links[first, _PRIORITY] > links[second, _PRIORITY]:
            node = first
            first = links[first, _RIGHT]
            child = _RIGHT
        else:
            node = second
            second = links[second, _LEFT]
            child = _LEFT
        if tail == 0:
            root = node
        else:
            links[tail, side] = node
        tail, side = node, child
        stack[depth] = node
        depth += 1
    rest = first if first != 0 else second
    if tail == 0:
        return rest
    links[tail, side] = rest
    for i in range(depth - 1, -1, -1):
        _pull(stack[i], values, links)
    return root


@nb.njit(cache=True)
def _locate(
    c: float,
    node: int,
    offset_len: float,
    offset_weight: float,
    values: FloatArray,
    links: IntArray,
) -> tuple[int, float, float]:
    """``(node, free length before it, free weight before it)`` of the first interval ending
    after compressed position c, or of the last interval if none does (node 0: no interval),
    in the tree ``node`` whose intervals follow ``offset_len`` free units of weight
    ``offset_weight`` (0 and 0 for the whole free part)."""
    found, found_len, found_weight = 0, 0.0, 0.0
    while node != 0:
        left = links[node, _LEFT]
        start = offset_len + values[left, _LEN_SUM]
        before = offset_weight + values[left, _WEIGHT_SUM]
        end = start + (values[node, _END] - values[node, _START])
        if end > c or (found == 0 and links[node, _RIGHT] == 0):  # or the last interval
            found, found_len, found_weight = node, start, before
        if end > c:
            node = left
        else:
            offset_len, offset_weight = end, before + values[node, _WEIGHT]
            node = links[node, _RIGHT]
    return found, found_len, found_weight


@nb.njit(cache=True)
def _free_weight(
    c: float,
    tree: int,
    offset_len: float,
    offset_weight: float,
    values: FloatArray,
    links: IntArray,
    cut: float,
    n: int,
) -> float:
    """Weight of the first ``c`` units of the free space (compressed coordinate), c inside
    or after the tree ``tree`` that follows ``offset_len`` units of weight ``offset_weight``."""
    node, before_len, before_weight = _locate(c, tree, offset_len, offset_weight, values, links)
    start, end = values[node, _START], values[node, _END]
    if before_len + (end - start) <= c:  # c at or past the end of the tree
        return offset_weight + values[tree, _WEIGHT_SUM]
    return before_weight + weight_between(start, min(start + (c - before_len), end), cut, n)


@nb.njit(cache=True)
def _weight_after(
    c: float, root: int, values: FloatArray, links: IntArray, cut: float, n: int
) -> float:
    """Weight of the free space after compressed position c, summed as non-negative terms
    (exactly 0 where all of it lies past the cut, as the back stretch of a token with A = 0
    must be: a difference of two prefix weights summed in different orders need not be)."""
    total, offset = 0.0, 0.0
    node = root
    while node != 0:
        left, right = links[node, _LEFT], links[node, _RIGHT]
        start = offset + values[left, _LEN_SUM]
        end = start + (values[node, _END] - values[node, _START])
        if end > c:
            total += values[right, _WEIGHT_SUM]
            s = values[node, _START]
            if start >= c:
                total += values[node, _WEIGHT]
                node = left
            else:  # c inside this interval: nothing before it counts
                return total + weight_between(s + (c - start), values[node, _END], cut, n)
        else:
            offset = end
            node = right
    return total


@nb.njit(cache=True)
def _density(u: float, cut: float, n: int) -> float:
    """w(u) = n (1 - u)^(n-1) below the cut, 0 from it on."""
    return n * (1.0 - u) ** (n - 1) if u < cut else 0.0


@nb.njit(cache=True)
def _weight_into(
    c: float, start: float, before_len: float, before_weight: float, cut: float, n: int
) -> float:
    """Weight of the first ``c`` compressed units when c lies in the free interval that starts
    at ``start``, after ``before_len`` free units of weight ``before_weight``."""
    return before_weight + weight_between(start, start + (c - before_len), cut, n)


@nb.njit(cache=True)
def _breakpoints(
    a: float,
    b: float,
    shift: float,
    width: float,
    target: float,
    root: int,
    values: FloatArray,
    links: IntArray,
    cut: float,
    n: int,
) -> tuple[float, float]:
    """Narrow (a, b) to the breakpoints ``end - shift`` (``end`` a free interval's end,
    compressed) around the c where the stretch [c, c + width] weighs ``target``: a binary
    search down the tree (the stretch's weight is non-increasing in c)."""
    offset_len, offset_weight = 0.0, 0.0
    node = root
    while node != 0:
        left = links[node, _LEFT]
        end = offset_len + values[left, _LEN_SUM] + (values[node, _END] - values[node, _START])
        point = end - shift
        goes_right = point <= a
        if a < point < b:
            # the weight up to ``end`` is known here; the stretch's other end needs a descent,
            # from this node's right subtree or its own subtree when the end lies in them
            through = offset_weight + values[left, _WEIGHT_SUM] + values[node, _WEIGHT]
            right = links[node, _RIGHT]
            if shift == 0.0:
                if point + width < end + values[right, _LEN_SUM]:
                    got = _free_weight(point + width, right, end, through, values, links, cut, n)
                else:
                    got = _free_weight(point + width, root, 0.0, 0.0, values, links, cut, n)
                got -= through
            elif point >= offset_len:
                got = through - _free_weight(
                    point, node, offset_len, offset_weight, values, links, cut, n
                )
            else:
                got = through - _free_weight(point, root, 0.0, 0.0, values, links, cut, n)
            goes_right = got > target
            if goes_right:
                a = point
            else:
                b = point
        if goes_right:
            offset_len = end
            offset_weight += values[left, _WEIGHT_SUM] + values[node, _WEIGHT]
            node = links[node, _RIGHT]
        else:
            node = left
    return a, b


@nb.njit(cache=True)
def _excess(
    c: float, width: float, target: float, ends: StretchEnds, cut: float, n: int
) -> tuple[float, float]:
    """``(g, rounding)``: the weight of the free stretch [c, c + width] minus ``target``, its
    ends in the free intervals ``ends`` describes, and g's rounding (a few ulps of the weight
    up to c + width, the larger of the two it is the difference of)."""
    start_i, len_i, weight_i, start_j, len_j, weight_j = ends
    up_to_end = _weight_into(c + width, start_j, len_j, weight_j, cut, n)
    g = up_to_end - _weight_into(c, start_i, len_i, weight_i, cut, n) - target
    return g, ROUNDING * up_to_end


@nb.njit(cache=True)
def _ends_at(c: float, width: float, root: int, values: FloatArray, links: IntArray) -> StretchEnds:
    """The free intervals of compressed positions c and c + width, each as (its start, the
    free length and weight before it): what :func:`_excess` needs."""
    i, len_i, weight_i = _locate(c, root, 0.0, 0.0, values, links)
    j, len_j, weight_j = _locate(c + width, root, 0.0, 0.0, values, links)
    return (values[i, _START], len_i, weight_i, values[j, _START], len_j, weight_j)


@nb.njit(cache=True)
def _newton(
    a: float, b: float, x: float, width: float, target: float, ends: StretchEnds, cut: float, n: int
) -> float:
    """The c in (a, b) where the stretch [c, c + width], its ends in the fixed intervals
    ``ends``, weighs ``target``: safeguarded Newton steps from x (one for n = 2, where the
    weight is linear in c) until the weight is ``target`` to rounding (:func:`_excess`).

    Iterating further only moves c among the positions whose weight rounds to ``target``: a
    whole range where the density is nearly flat over the stretch (the slope is
    w(c + width) - w(c)), so c is ill-conditioned but its weight, all that Lemma 3 asks of
    it, is not (docs/partial-resolution.md)."""
    start_i, len_i, _, start_j, len_j, _ = ends
    for _ in range(BISECTIONS):
        g, rounding = _excess(x, width, target, ends, cut, n)
        if g > 0:
            a = x
        else:
            b = x
        if abs(g) <= rounding:
            break
        slope = _density(start_j + (x + width - len_j), cut, n)
        slope -= _density(start_i + (x - len_i), cut, n)
        step = x - g / slope if slope < 0 else 0.5 * (a + b)
        if not (a < step < b):
            step = 0.5 * (a + b)
        if abs(step - x) <= 1e-17 or b - a <= 0.0:
            x = step
            break
        x = step
    return x


@nb.njit(cache=True)
def _solve_stretch(
    lo: float,
    hi: float,
    width: float,
    target: float,
    root: int,
    values: FloatArray,
    links: IntArray,
    cut: float,
    n: int,
) -> float:
    """The c in (lo, hi) where the free stretch [c, c + width] weighs ``target`` (its weight
    is non-increasing in c, above ``target`` at lo and at most ``target`` at hi).

    A binary search over the breakpoints (c or c + width at a free interval's end), then,
    with both ends in fixed intervals, :func:`_newton` from the middle."""
    a, b = _breakpoints(lo, hi, 0.0, width, target, root, values, links, cut, n)
    a, b = _breakpoints(a, b, width, width, target, root, values, links, cut, n)
    middle = 0.5 * (a + b)
    return _newton(
        a, b, middle, width, target, _ends_at(middle, width, root, values, links), cut, n
    )


@nb.njit(cache=True)
def _guess(
    width: float,
    target: float,
    hi: float,
    ends: StretchEnds,
    span_i: float,
    span_j: float,
    cut: float,
    n: int,
) -> tuple[float, float, float]:
    """``(c, lo, top)``: the root c of :func:`_place` if it lies strictly inside the range of
    c where the stretch's ends stay in the free intervals ``ends`` describes (of lengths
    ``span_i`` and ``span_j``), else -1; and the bracket [lo, top] of [0, hi] that holds the
    root by what the range's ends weigh.

    Over that range the weight is one smooth function; if it crosses ``target`` strictly
    inside, the root is there and unique (the weight is strictly decreasing in c where it is
    positive, for n >= 2: w decreases below the cut; for n = 1 a flat stretch weighs its
    width > target everywhere), and :func:`_newton` finds it from the linear
    interpolation."""
    _, len_i, _, _, len_j, _ = ends
    a = max(len_i, len_j - width, 0.0)
    b = min(len_i + span_i, hi, len_j + span_j - width)
    lo, top = 0.0, hi
    if a < b:
        g_a, _ = _excess(a, width, target, ends, cut, n)
        g_b, _ = _excess(b, width, target, ends, cut, n)
        if g_a > 0.0 > g_b:
            x = a + (b - a) * (g_a / (g_a - g_b))
            return _newton(a, b, x, width, target, ends, cut, n), a, b
        if g_a <= 0.0:
            top = a
        else:
            lo = b
    return -1.0, lo, top


@nb.njit(cache=True)
def _place(
    width: float,
    target: float,
    near: float,
    root: int,
    values: FloatArray,
    links: IntArray,
    cut: float,
    n: int,
) -> float:
    """The compressed start c of a token's stretch [c, c + width] of weight ``target``
    (Lemma 3).

    First a guess (:func:`_guess`): the stretch centred on ``near`` (the previous token's
    start, where it left its gap; in decreasing q/p each stretch is observed to take the two
    sides of that gap). Otherwise: 0 if the front already weighs at most ``target``, the back
    end if the back (everything after ``total - width``) already weighs at least it, else
    :func:`_solve_stretch` in the bracket :func:`_bracket` finds next to the guess (a token
    that does not take both sides of the gap is observed to lie within a few widths of it,
    on its left)."""
    hi = values[root, _LEN_SUM] - width
    c = min(max(near - 0.5 * width, 0.0), hi)
    i, len_i, weight_i = _locate(c, root, 0.0, 0.0, values, links)
    j, len_j, weight_j = _locate(c + width, root, 0.0, 0.0, values, links)
    ends = (values[i, _START], len_i, weight_i, values[j, _START], len_j, weight_j)
    span_i = values[i, _END] - values[i, _START]
    span_j = values[j, _END] - values[j, _START]
    guess, lo, top = _guess(width, target, hi, ends, span_i, span_j, cut, n)
    if guess >= 0.0:
        return guess
    if _free_weight(width, root, 0.0, 0.0, values, links, cut, n) <= target:
        return 0.0
    if _weight_after(hi, root, values, links, cut, n) >= target:
        return hi
    lo, top = _bracket(lo, top, hi, width, target, root, values, links, cut, n)
    return _walk(lo, top, hi, width, target, root, values, links, cut, n)


@nb.njit(cache=True)
def _walk(
    lo: float,
    top: float,
    hi: float,
    width: float,
    target: float,
    root: int,
    values: FloatArray,
    links: IntArray,
    cut: float,
    n: int,
) -> float:
    """The root in the bracket [lo, top]: from lo, stretch by stretch over the ranges of c
    where both ends stay in the same free intervals (a few, next to the guess), the first
    range whose end weighs at most ``target`` holds it (:func:`_newton`); after ``WALK``
    ranges, the binary search over breakpoints (:func:`_solve_stretch`) from there."""
    for _ in range(WALK):
        i, len_i, weight_i = _locate(lo, root, 0.0, 0.0, values, links)
        j, len_j, weight_j = _locate(lo + width, root, 0.0, 0.0, values, links)
        ends = (values[i, _START], len_i, weight_i, values[j, _START], len_j, weight_j)
        b = min(len_i + (values[i, _END] - values[i, _START]), hi, top)
        b = min(b, len_j + (values[j, _END] - values[j, _START]) - width)
        g_b, _ = _excess(b, width, target, ends, cut, n)
        if g_b <= 0.0 or b >= top:
            g_lo, _ = _excess(lo, width, target, ends, cut, n)
            x = lo + (b - lo) * (g_lo / (g_lo - g_b)) if g_lo > g_b else 0.5 * (lo + b)
            return _newton(lo, b, x, width, target, ends, cut, n)
        lo = b
    return _solve_stretch(lo, top, width, target, root, values, links, cut, n)


@nb.njit(cache=True)
def _bracket(
    lo: float,
    top: float,
    hi: float,
    width: float,
    target: float,
    root: int,
    values: FloatArray,
    links: IntArray,
    cut: float,
    n: int,
) -> tuple[float, float]:
    """Narrow the bracket [lo, top] of the root (in [0, hi]) from the end the guess set:
    steps of width, 2 width, 4 width ... away from it until the stretch's weight changes
    side of ``target`` (the weight is non-increasing in c), so that the binary search over
    breakpoints (:func:`_solve_stretch`) visits few of them."""
    step = width
    if top < hi:  # the root is at most top: step left
        while top - step > lo:
            x = top - step
            g, _ = _excess(x, width, target, _ends_at(x, width, root, values, links), cut, n)
            if g > 0.0:
                return x, top
            top, step = x, 2.0 * step
    elif lo > 0.0:  # the root is at least lo: step right
        while lo + step < top:
            x = lo + step
            g, _ = _excess(x, width, target, _ends_at(x, width, root, values, links), cut, n)
            if g <= 0.0:
                return lo, x
            lo, step = x, 2.0 * step
    return lo, top


# A free part of at most two intervals, the common case (in decreasing q/p a token is observed
# to take the two sides of the gap the previous one left, at k = V too), is kept in scalars
# without the tree: ``(start, end)`` of the first and of the second interval, the first's
# weight, and how many there are (0, 1 or 2). Placing a stretch in it is :func:`_place` with
# each descent replaced by a comparison with the first interval's length.
Pair = tuple[float, float, float, float, float, int]


@nb.njit(cache=True)
def _pair(s0: float, e0: float, s1: float, e1: float, count: int, cut: float, n: int) -> Pair:
    """The free part ``[s0, e0]`` then ``[s1, e1]`` (the first ``count`` of them; the
    others are read as empty intervals at 0)."""
    if count < 2:
        s1, e1 = 0.0, 0.0
    if count < 1:
        s0, e0 = 0.0, 0.0
    return (s0, e0, s1, e1, weight_between(s0, e0, cut, n), count)


@nb.njit(cache=True)
def _pair_locate(c: float, free: Pair) -> tuple[float, float, float, float]:
    """``(start, end, free length before, free weight before)`` of the free interval that
    :func:`_locate` finds for compressed position c (the first ending after c, else the
    last)."""
    s0, e0, s1, e1, w0, count = free
    if count == 2 and c >= e0 - s0:
        return s1, e1, e0 - s0, w0
    return s0, e0, 0.0, 0.0


@nb.njit(cache=True)
def _pair_ends(c: float, width: float, free: Pair) -> StretchEnds:
    """:func:`_ends_at` in a free pair."""
    start_i, _, len_i, weight_i = _pair_locate(c, free)
    start_j, _, len_j, weight_j = _pair_locate(c + width, free)
    return (start_i, len_i, weight_i, start_j, len_j, weight_j)


@nb.njit(cache=True)
def _pair_length(free: Pair) -> float:
    """The free length of a pair."""
    s0, e0, s1, e1, _, count = free
    return (e0 - s0 if count else 0.0) + (e1 - s1 if count == 2 else 0.0)


@nb.njit(cache=True)
def _place_pair(width: float, target: float, near: float, free: Pair, cut: float, n: int) -> float:
    """:func:`_place` in a free pair: the same guess, front and back checks, and binary
    search over the two breakpoints (c or c + width at the first interval's end)."""
    s0, e0, s1, e1, _, count = free
    hi = _pair_length(free) - width
    c = min(max(near - 0.5 * width, 0.0), hi)
    start_i, end_i, len_i, weight_i = _pair_locate(c, free)
    start_j, end_j, len_j, weight_j = _pair_locate(c + width, free)
    ends = (start_i, len_i, weight_i, start_j, len_j, weight_j)
    guess, _, _ = _guess(width, target, hi, ends, end_i - start_i, end_j - start_j, cut, n)
    if guess >= 0.0:
        return guess
    start, end, before_len, before_weight = _pair_locate(width, free)
    if before_len + (end - start) <= width:  # the whole free part
        front = before_weight + weight_between(start, end, cut, n)
    else:
        front = _weight_into(width, start, before_len, before_weight, cut, n)
    if front <= target:
        return 0.0
    start, end, before_len, _ = _pair_locate(hi, free)
    back = weight_between(start + (hi - before_len), end, cut, n)
    if count == 2 and before_len == 0.0:
        back += weight_between(s1, e1, cut, n)
    if back >= target:
        return hi
    a, b = 0.0, hi
    for point in (e0 - s0, e0 - s0 - width):
        if count == 2 and a < point < b:
            g, _ = _excess(point, width, target, _pair_ends(point, width, free), cut, n)
            if g > 0.0:
                a = point
            else:
                b = point
    middle = 0.5 * (a + b)
    return _newton(a, b, middle, width, target, _pair_ends(middle, width, free), cut, n)


@nb.njit(cache=True)
def _carve_pair(
    lo_c: float,
    hi_c: float,
    free: Pair,
    kept: FloatArray,
    p_start: FloatArray,
    p_end: FloatArray,
    pieces: int,
) -> tuple[int, int]:
    """:func:`_carve` in a free pair: the pieces of [lo_c, hi_c] go to
    ``p_start/p_end[pieces:]``, the free intervals left (up to three) to ``kept`` (rows of
    start, end); returns ``(how many are left, pieces)``."""
    s0, e0, s1, e1, _, count = free
    total = _pair_length(free)
    left = 0
    a_c = 0.0
    for i in range(count):
        s, e = (s0, e0) if i == 0 else (s1, e1)
        b_c = total if i == count - 1 else a_c + (e - s)
        if b_c <= lo_c or a_c >= hi_c:  # outside the stretch: kept whole
            kept[left, 0], kept[left, 1] = s, e
            left += 1
        else:
            cs = s + (lo_c - a_c) if lo_c > a_c else s
            ce = min(s + (hi_c - a_c), e) if hi_c < b_c else e
            if ce > cs:
                p_start[pieces] = cs
                p_end[pieces] = ce
                pieces += 1
            if cs > s:
                kept[left, 0], kept[left, 1] = s, cs
                left += 1
            if e > ce:
                kept[left, 0], kept[left, 1] = ce, e
                left += 1
        a_c = b_c
    return left, pieces


@nb.njit(cache=True)
def _carve(
    lo_c: float,
    hi_c: float,
    root: int,
    fresh: int,
    tree: tuple[FloatArray, IntArray, IntArray, IntArray],
    p_start: FloatArray,
    p_end: FloatArray,
    pieces: int,
    cut: float,
    n: int,
) -> tuple[int, int, int]:
    """Carve the compressed stretch [lo_c, hi_c] out of the free part: its pieces go to
    ``p_start/p_end[pieces:]`` in increasing position; returns ``(root, fresh, pieces)``.

    Split off the run of intervals that overlap it (ending after lo_c, starting before
    hi_c), cut the run's first at lo_c and its last at hi_c, and merge back what is left of
    those two: the free list gains at most one interval (``fresh``, the next unused node)."""
    values, links, stack, run = tree
    total = values[root, _LEN_SUM]
    head, tail = _split(root, hi_c, False, values, links, stack)
    before, middle = _split(head, lo_c, True, values, links, stack)
    size, depth, node = 0, 0, middle
    while node != 0 or depth > 0:  # the run, in order
        while node != 0:
            stack[depth] = node
            depth += 1
            node = links[node, _LEFT]
        depth -= 1
        run[size] = stack[depth]
        size += 1
        node = links[stack[depth], _RIGHT]
    keep_left, keep_right = 0, 0
    a_c = values[before, _LEN_SUM]
    for i in range(size):
        node = run[i]
        s, e = values[node, _START], values[node, _END]
        b_c = total if i == size - 1 and tail == 0 else a_c + (e - s)
        cs = s + (lo_c - a_c) if i == 0 and lo_c > a_c else s
        ce = min(s + (hi_c - a_c), e) if i == size - 1 and hi_c < b_c else e
        if ce > cs:
            p_start[pieces] = cs
            p_end[pieces] = ce
            pieces += 1
        if cs > s:  # the first interval keeps its part before lo_c
            keep_left = _leaf(node, s, cs, values, links, cut, n)
        if e > ce:  # the last keeps its part after hi_c (a new node if the first kept its)
            spare = node
            if keep_left == node:
                spare, fresh = fresh, fresh + 1
            keep_right = _leaf(spare, ce, e, values, links, cut, n)
        a_c = b_c
    root = _merge(before, keep_left, values, links, stack)
    root = _merge(root, keep_right, values, links, stack)
    return _merge(root, tail, values, links, stack), fresh, pieces


@nb.njit(cache=True)
def _fill_segment(
    q: FloatArray,
    accepted: FloatArray,
    order: IntArray,
    needed: BoolArray,
    begin: int,
    end: int,
    stop: int,
    line: float,
    length: float,
    tree: tuple[FloatArray, IntArray, IntArray, IntArray],
    out: tuple[FloatArray, FloatArray, IntArray, IntArray],
    pieces: int,
    cut: float,
    n: int,
) -> tuple[int, int]:
    """Gap filling (Lemma 3) of the segment ``order[begin:end]`` that starts at ``line``, up
    to ``order[stop - 1]``: ``out = (starts, ends, first, last)`` gets the pieces of the
    tokens in ``needed`` from index ``pieces`` on. Returns ``(pieces, root)``: the root of
    the free part left if it is a tree (its shape is what the tests check: a balanced tree),
    0 if it is a pair.

    The free part is a pair (:data:`Pair`, in scalars) while it has at most two intervals,
    a tree (nodes from 1 on) while it has more. Each step places (:func:`_place`) and carves
    (:func:`_carve`) one stretch: a token's, or a run's. A run is a stretch of consecutive
    tokens outside ``needed`` whose accepted densities A/q lie between the weight just right
    and just left of the stretch the previous step took (the hole): each of them would take
    a stretch across the hole (the free part's weight is non-increasing in the compressed
    coordinate), so their union is one stretch of the free part before them, of length
    q(run) and weight A(run), whose root in Lemma 3 is unique (A(run) > 0, n >= 2); the free
    part left is the one token-by-token filling leaves, and the run's tokens get no pieces
    (docs/partial-resolution.md, "Runs")."""
    values, links, stack, _ = tree
    p_start, p_end, first, last = out
    kept = np.zeros((3, 2))
    free = _pair(line, line + length, 0.0, 0.0, 1 if line + length > line else 0, cut, n)
    root, fresh = 0, 0
    lo_c = 0.0
    left, right = -1.0, -1.0  # the weight just left and right of the hole (-1: none to join)
    t = begin
    while t < stop:
        x = order[t]
        width, target, after = 0.0, 0.0, t
        while after < min(stop, end - 1) and not needed[order[after]]:
            y = order[after]
            if not (0.0 < accepted[y] <= left * q[y] and right * q[y] <= accepted[y]):
                break
            width += q[y]
            target += accepted[y]
            after += 1
        run = after > t
        if not run:
            width, target, after = q[x], accepted[x], t + 1
        total = values[root, _LEN_SUM] if root else _pair_length(free)
        width = min(width, total)
        if t == end - 1:  # the segment's last token takes what is left
            lo_c, width = 0.0, total
        elif root:
            lo_c = _place(width, target, lo_c, root, values, links, cut, n)
        else:
            lo_c = _place_pair(width, target, lo_c, free, cut, n)
        before = pieces
        if root:
            root, fresh, pieces = _carve(
                lo_c, lo_c + width, root, fresh, tree, p_start, p_end, pieces, cut, n
            )
            small, pair = _as_pair(root, values, links, cut, n)
            if small:  # back to a pair
                root, free = 0, pair
        else:
            kept_count, pieces = _carve_pair(lo_c, lo_c + width, free, kept, p_start, p_end, pieces)
            if kept_count <= 2:
                free = _pair(kept[0, 0], kept[0, 1], kept[1, 0], kept[1, 1], kept_count, cut, n)
            else:  # three intervals: nodes 1-3 of a fresh tree
                for node in range(1, 4):
                    leaf = _leaf(node, kept[node - 1, 0], kept[node - 1, 1], values, links, cut, n)
                    root = _merge(root, leaf, values, links, stack)
                fresh = 4
        left, right = -1.0, -1.0
        hole = pieces > before and lo_c > 0.0 and lo_c + width < total  # free on both sides
        if hole and n > 1 and after < stop and not needed[order[after]]:  # a run may follow
            left = _density(p_start[before], cut, n)
            right = _density(p_end[pieces - 1], cut, n)
        if run:
            pieces = before  # nobody's pieces
        else:
            first[x], last[x] = before, pieces
        t = after
    return pieces, root


@nb.njit(cache=True)
def _as_pair(
    root: int, values: FloatArray, links: IntArray, cut: float, n: int
) -> tuple[bool, Pair]:
    """``(True, the pair)`` if the tree has at most two intervals, else ``(False, any pair)``."""
    left, right = links[root, _LEFT], links[root, _RIGHT]
    child = left + right
    if (left != 0 and right != 0) or links[child, _LEFT] != 0 or links[child, _RIGHT] != 0:
        return False, _pair(0.0, 0.0, 0.0, 0.0, 0, cut, n)
    one, two = (child, root) if left != 0 else (root, child)
    count = (one != 0) + (two != 0)
    s0, e0, s1, e1 = values[one, _START], values[one, _END], values[two, _START], values[two, _END]
    return True, _pair(s0, e0, s1, e1, count, cut, n)


@nb.njit(cache=True)
def clock_pieces(
    q: FloatArray,
    accepted: FloatArray,
    order: IntArray,
    segment_ends: IntArray,
    n: int,
    cut: float,
) -> tuple[FloatArray, FloatArray, IntArray, IntArray]:
    """The sets ``I_x`` of every token by gap filling: :func:`clock_pieces_of` every token."""
    return clock_pieces_of(q, accepted, order, segment_ends, np.ones(q.shape[0], np.bool_), n, cut)


@nb.njit(cache=True)
def clock_pieces_of(
    q: FloatArray,
    accepted: FloatArray,
    order: IntArray,
    segment_ends: IntArray,
    needed: BoolArray,
    n: int,
    cut: float,
) -> tuple[FloatArray, FloatArray, IntArray, IntArray]:
    """The sets ``I_x`` of the tokens in ``needed`` by gap filling: ``(starts, ends, first,
    last)``.

    Tokens are taken in ``order``; ``segment_ends`` cuts ``order`` into segments (the tight
    chain of [GR] Theorem 6.2's blocks, then H*), segment j owning the stretch of [0, 1] after
    the earlier segments' draft mass. Within a segment each token takes the stretch
    ``[c, c + q(x)]`` of the still-free part (compressed coordinate) whose weight is
    ``accepted[x]`` (the weight is non-increasing in c: bisection); the segment's last token
    takes what is left. Token x's pieces are ``starts[first[x]:last[x]]`` to
    ``ends[first[x]:last[x]]``, in increasing position.

    A token's set depends only on the tokens before it in its own segment (Lemma 3 fills in
    order, segments own disjoint stretches), so each segment is filled only up to its last
    needed token, and runs of tokens nobody needs take one stretch together where that
    leaves the same free part (:func:`_fill_segment`): a decoder row fills only what its
    drafted tokens need. A token outside ``needed`` may get no pieces.

    The free part is a balanced tree (:func:`_split`, :func:`_merge`) once it has more than
    two intervals: O(log m) per search step over m free intervals, O(k log^2 k) in all,
    where a flat free list cost O(k^2) on a segment of k tokens.
    """
    k = q.shape[0]
    # each token carves a run of free intervals and leaves at most two; every segment starts
    # with one: at most 3k pieces, and k + 2 nodes (node 0 the empty tree)
    out = (
        np.empty(3 * k + 1),
        np.empty(3 * k + 1),
        np.zeros(k, dtype=np.int64),
        np.zeros(k, dtype=np.int64),
    )
    values, links = _new_tree(k + 2)
    tree = (values, links, np.empty(k + 2, dtype=np.int64), np.empty(k + 2, dtype=np.int64))
    pieces = 0
    line = 0.0
    begin = 0
    for seg in range(segment_ends.shape[0]):
        end = segment_ends[seg]
        length = 0.0
        stop = begin
        for t in range(begin, end):
            length += q[order[t]]
            if needed[order[t]]:
                stop = t + 1
        pieces, _ = _fill_segment(
            q, accepted, order, needed, begin, end, stop, line, length, tree, out, pieces, cut, n
        )
        line += length
        begin = end
    return out[0][:pieces].copy(), out[1][:pieces].copy(), out[2], out[3]


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
