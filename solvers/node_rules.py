"""One-pass kernels for verifying a draft-tree node on the caller's own rows (numba).

A decoder hands over its softmax rows in float32 (or float64); verifying a node of a draft
tree needs at most a few passes over them: one to check a row (finite, nonnegative, its sum),
and, for the rejection rules, one residual pass per rejected draft and one inverse-CDF pass
for the token drawn after the last rejection. These kernels read the rows in their own dtype
and do the arithmetic in float64 element by element, so no float64 copy of a row is made;
residual laws are drawn without being stored (:func:`_draw_terms`, chunked inverse CDF).

* :func:`row_total` — a row's sum and the first entry that is negative, NaN or infinite.
* :func:`rejection_token` — recursive rejection sampling ([SpecHub] Algorithm 1), with or
  without replacement, one draft = speculative sampling; draft j is accepted when
  u_j q_j(x_j) < p_j(x_j), and only a rejection computes the residual
  p_{j+1} = norm(max(p_j - q_j, 0)) (without replacement q_{j+1} is q_j with x_j removed,
  renormalised by the sum of the rest, never by 1 - q_j(x_j)).
* :func:`kseq_token` — SpecTr's K-SEQ: rho* by :func:`kseq_rho` (a few passes: regula falsi
  and beta's closed form between the breakpoints p / q), accepts at the drafts, the residual
  only after n rejections.
* :func:`hub_token` — [SpecHub] Algorithm 3 on the hub pair: the argmax pass, the leftover
  masses only after the first rejection.
* :func:`node_token` — one of the three by rule; :func:`node_walk` walks a whole batch of
  draft trees with it.
* :func:`draw_scaled` — an inverse-CDF draw from ``row / total`` with one uniform.
* :func:`path_token` — block verification of one drafted path ([GBV] §2.1), or GBV's
  against its skewed draft ([GBV] §5): tau drawn from the top, so the excess mass r_i is
  computed only for i >= tau; GBV's excess summed over buckets of the ranking key (closed
  form where every term is positive, only mixed buckets sorted). :func:`block_walk` verifies
  a whole batch of chains with it.

They import nothing from ``otlp``; :mod:`otlp.verification.tree` calls them.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numpy.typing import NDArray

from otlp.solvers.row_status import (
    BAD_DRAFT,
    BAD_DRAFT_ROW,
    BAD_TARGET_ROW,
    NOT_HUB,
    REPEATED,
    TOO_MANY,
)

CHUNK = 256  # entries summed at once by the inverse-CDF draws before scanning one chunk
TINY = 1e-300  # a residual with less mass falls back to its target (otlp.rules.base.residual)


@nb.njit(cache=True, fastmath={"reassoc", "contract"})
def row_total(row: NDArray) -> tuple[float, int]:
    """(sum of ``row`` in float64, index of its first negative/NaN/infinite entry or -1).

    One branch-free pass (vectorised); the offending entry is looked for only when the sum
    is not finite or an entry is negative."""
    total = 0.0
    negative = 0
    for i in range(row.shape[0]):
        x = np.float64(row[i])
        total += x
        negative += 1 if x < 0.0 else 0
    if np.isfinite(total) and negative == 0:
        return total, -1
    for i in range(row.shape[0]):
        x = np.float64(row[i])
        if not (x >= 0.0 and x < np.inf):
            return total, i
    return total, -1


@nb.njit(cache=True, fastmath={"reassoc", "contract"})
def _chunk_sum(row: NDArray, start: int, stop: int, scale: float) -> float:
    total = 0.0
    for i in range(start, stop):
        total += np.float64(row[i]) * scale
    return total


@nb.njit(cache=True)
def draw_scaled(row: NDArray, total: float, u: float) -> int:
    """The first index whose running sum of ``row`` exceeds ``u * total`` (the draw of
    ``otlp.verification.tree.draw``: never a token of zero mass). Whole chunks of
    :data:`CHUNK` entries are summed vectorised; only the chunk holding the draw is scanned."""
    target = u * total
    acc = 0.0
    last = -1
    vocab = row.shape[0]
    for start in range(0, vocab, CHUNK):
        stop = min(start + CHUNK, vocab)
        mass = _chunk_sum(row, start, stop, 1.0)
        if mass > 0.0 and acc + mass <= target:
            acc += mass
            for i in range(stop - 1, start - 1, -1):
                if row[i] > 0:
                    last = i
                    break
            continue
        for i in range(start, stop):
            x = np.float64(row[i])
            if x > 0.0:
                last = i
                acc += x
                if acc > target:
                    return i
    return last


@nb.njit(cache=True)
def rejection_token(
    p: NDArray,
    q: NDArray,
    p_total: float,
    q_total: float,
    omega: NDArray[np.int64],
    without_replacement: bool,
    u: NDArray[np.float64],
    work: NDArray[np.float64],
    removed: NDArray[np.bool_],
) -> int:
    """Recursive rejection sampling on rows ``p``, ``q`` (their sums ``p_total``,
    ``q_total``) for the drafts ``omega`` in draw order with uniforms ``u`` (n + 1).

    ``work`` (float64, (2, V)) holds the current and the previous residual (the previous is
    the fallback when nothing is left); ``removed`` (bool, V, all False on entry and on
    return) marks the drafts taken out of q without replacement.
    """
    n = omega.shape[0]
    vocab = p.shape[0]
    z = p_total  # the current target is work[cur] / z (p / p_total before any rejection)
    q_den = q_total
    cur = -1
    token = -1
    rest = 0.0
    for j in range(n):
        x = omega[j]
        t_x = np.float64(p[x]) / z if cur < 0 else work[cur, x] / z
        d_x = np.float64(q[x]) / q_den
        if u[j] * d_x < t_x:
            token = x
            break
        new = 0 if cur != 0 else 1
        if without_replacement:
            left, rest = _residual_without(p, q, z, q_den, cur, new, work, removed, x)
        else:
            left = _residual(p, q, z, q_den, cur, new, work)
        if not left > TINY:  # nothing left: the residual falls back to the current target
            left = 0.0
            for i in range(vocab):
                work[new, i] = np.float64(p[i]) / z if cur < 0 else work[cur, i] / z
                left += work[new, i]
        cur = new
        z = left
        if without_replacement:
            removed[x] = True
            q_den = rest
    if token < 0:
        token = draw_scaled(work[cur], z, float(u[n]))
    if without_replacement:
        for j in range(n):
            removed[omega[j]] = False
    return token


@nb.njit(cache=True, fastmath={"reassoc", "contract"})
def _residual(
    p: NDArray, q: NDArray, z: float, q_den: float, cur: int, new: int, work: NDArray[np.float64]
) -> float:
    """work[new] = max(t - q / q_den, 0) with t = work[cur] / z (p / z when cur < 0); its sum."""
    left = 0.0
    scale = 1.0 / z
    q_scale = 1.0 / q_den
    if cur < 0:
        for i in range(p.shape[0]):
            r = max(np.float64(p[i]) * scale - np.float64(q[i]) * q_scale, 0.0)
            work[new, i] = r
            left += r
    else:
        for i in range(p.shape[0]):
            r = max(work[cur, i] * scale - np.float64(q[i]) * q_scale, 0.0)
            work[new, i] = r
            left += r
    return left


@nb.njit(cache=True, fastmath={"reassoc", "contract"})
def _residual_without(
    p: NDArray,
    q: NDArray,
    z: float,
    q_den: float,
    cur: int,
    new: int,
    work: NDArray[np.float64],
    removed: NDArray[np.bool_],
    x: int,
) -> tuple[float, float]:
    """:func:`_residual` with the removed drafts at draft probability 0, and the draft mass
    left once ``x`` is removed too (summed, never 1 - q(x))."""
    left = 0.0
    rest = 0.0
    scale = 1.0 / z
    q_scale = 1.0 / q_den
    for i in range(p.shape[0]):
        t = np.float64(p[i]) * scale if cur < 0 else work[cur, i] * scale
        qi = 0.0 if removed[i] else np.float64(q[i])
        r = max(t - qi * q_scale, 0.0)
        work[new, i] = r
        left += r
        rest += 0.0 if i == x else qi
    return left, rest


# Residual laws drawn by inverse CDF without being stored: term(i) is computed from p[i], q[i]
# (read as x = p[i] a, y = q[i] b) and up to two constants, per kind.
EXCESS = 0  # max(x - y, 0): block verification's correction (a = w / P)
KSEQ = 1  # max(x - c min(y, x / d), 0): K-SEQ's residual (c, d = rho*)
HUB = 2  # max(max(x - y, 0) - c y, 0): SpecHub's final residual off the hub (c = q(a) / rest)


@nb.njit(cache=True, inline="always")
def _term(kind: int, x: float, y: float, c: float, d: float) -> float:
    if kind == KSEQ:
        return max(x - c * min(y, x / d), 0.0)
    if kind == HUB:
        return max(max(x - y, 0.0) - c * y, 0.0)
    return max(x - y, 0.0)


@nb.njit(cache=True, fastmath={"reassoc", "contract"})
def _chunk_terms(
    kind: int,
    p: NDArray,
    q: NDArray,
    start: int,
    stop: int,
    a: float,
    b: float,
    c: float,
    d: float,
    special: int,
    value: float,
) -> float:
    """sum over [start, stop) of the residual terms, ``value`` at index ``special``. (The
    scales come in as arguments: computed inside, LLVM left this loop unvectorised, 6x
    slower.)"""
    left = 0.0
    for i in range(start, stop):
        t = _term(kind, np.float64(p[i]) * a, np.float64(q[i]) * b, c, d)
        left += value if i == special else t
    return left


@nb.njit(cache=True)
def _draw_terms(
    kind: int,
    p: NDArray,
    q: NDArray,
    a: float,
    b: float,
    c: float,
    d: float,
    special: int,
    value: float,
    left: float,
    u: float,
) -> int:
    """An inverse-CDF draw from the residual terms (their sum ``left``), chunked as
    :func:`draw_scaled`; -1 when every term is 0."""
    target = u * left
    acc = 0.0
    last = -1
    vocab = p.shape[0]
    for start in range(0, vocab, CHUNK):
        stop = min(start + CHUNK, vocab)
        mass = _chunk_terms(kind, p, q, start, stop, a, b, c, d, special, value)
        if mass > 0.0 and acc + mass <= target:
            acc += mass
            for i in range(stop - 1, start - 1, -1):
                t = _term(kind, np.float64(p[i]) * a, np.float64(q[i]) * b, c, d)
                if (value if i == special else t) > 0.0:
                    last = i
                    break
            continue
        for i in range(start, stop):
            t = _term(kind, np.float64(p[i]) * a, np.float64(q[i]) * b, c, d)
            r = value if i == special else t
            if r > 0.0:
                last = i
                acc += r
                if acc > target:
                    return i
    return last


# GBV's skewed draft ranks the support by the key p(x) / q(x); its excess mass is summed over
# buckets of the key (64 per octave, 2^-32 .. 2^32, the ends open) and only the buckets where
# the sign of w p - q~ can change are sorted.
BUCKETS = 4096
BUCKET_SHIFT = 46  # float64 bits >> 46: exponent and 6 mantissa bits
BUCKET_BASE = (1023 - 32) << 6
POSITIVE, ZERO, MIXED = 1, 0, 2  # a bucket's terms: all positive, all zero, either


@nb.njit(cache=True)
def path_token(
    p: NDArray,
    q: NDArray,
    p_rows: NDArray[np.int64],
    q_rows: NDArray[np.int64],
    p_totals: NDArray[np.float64],
    q_totals: NDArray[np.float64],
    path: NDArray[np.int64],
    paths: int,
    inverse: bool,
    work: tuple,
    u_stop: float,
    u_token: float,
) -> tuple[int, int]:
    """Block verification ([GBV] §2.1, Eqs. 4-7) of one drafted path, sampled; with
    ``paths`` = K > 1 against GBV's skewed draft q~ of the highest-ranked of K i.i.d. paths
    ([GBV] §5, Eqs. 28-29; ranking by increasing p / q, decreasing with ``inverse``, ties by
    token id: otlp.multistep.gbv).

    ``p[p_rows[i]]``, ``q[q_rows[i]]`` (sums ``p_totals[i]``, ``q_totals[i]``) are the
    target and draft laws after the path's first i tokens, i < L = ``path.shape[0]``. Weights
    w_0 = 1, w_{i+1} = min(w_i p_i(x_i) / q_i(x_i), 1); h_i = r_i / (r_i + 1 - w_i) with
    r_i = sum_x max(w_i p_i(x) - q_i(x), 0) (1 when the denominator is 0 or w_i = 1),
    h_L = w_L. tau = i with P(tau = i) = h_i prod_{j > i} (1 - h_j) is drawn by inverse CDF
    with ``u_stop``, from the top: P(tau <= i) = prod_{j > i} (1 - h_j), so r_i is computed
    only for i >= tau. Returns (tau, the correction token drawn with ``u_token`` from
    max(w_tau p_tau - q_tau, 0)), or (L, -1): the caller draws the bonus token from the
    target after the whole path. Reads the path's entries, one pass per level for GBV's
    ranked mass below the drafted token, and passes at the levels i >= tau. ``work``:
    :func:`buckets_work` of the vocabulary size (GBV's buckets)."""
    steps = path.shape[0]
    weights = np.ones(steps + 1)
    state = np.zeros((steps, 3))  # GBV: mass ranked below the prefix, prefix mass, q~(prefix)
    below, mass, parent = 0.0, 1.0, 1.0
    for i in range(steps):
        row_p, row_q = p[p_rows[i]], q[q_rows[i]]
        x = path[i]
        px = float(row_p[x]) / float(p_totals[i])
        qx = float(row_q[x]) / float(q_totals[i])
        if paths > 1:
            state[i] = (below, mass, parent)
            lo = below + mass * _ranked_below(row_p, row_q, x, inverse) / float(q_totals[i])
            child = mass * qx * _power_sum(lo, lo + mass * qx, paths)
            skewed = child / parent if parent > 0 else qx
            below, mass, parent = lo, mass * qx, child
            qx = skewed
        if qx > 0 and weights[i] > 0:  # a zero weight stays zero (px / qx may overflow to inf)
            weights[i + 1] = min(float(weights[i]) * (px / qx), 1.0)
        else:
            weights[i + 1] = weights[i]
    level = -1  # the level whose excess (and buckets) were computed last
    excess = 0.0
    later = 1.0  # P(tau <= i) = prod_{j > i} (1 - h_j)
    tau = steps
    while tau > 0:
        h = float(weights[steps])
        if tau < steps:
            h = 1.0
            if weights[tau] < 1.0:
                excess = _level_excess(
                    p, q, p_rows, q_rows, p_totals, q_totals, weights, state, paths, inverse, tau,
                    work,
                )  # fmt: skip
                level = tau
                denom = excess + 1.0 - float(weights[tau])
                h = min(excess / denom, 1.0) if denom > 0 else 1.0
        after = later * (1.0 - h)
        if not after > u_stop:
            break
        later = after
        tau -= 1
    if tau == steps:
        return tau, -1
    if level != tau:
        excess = _level_excess(
            p, q, p_rows, q_rows, p_totals, q_totals, weights, state, paths, inverse, tau, work
        )
    row_p, row_q = p[p_rows[tau]], q[q_rows[tau]]
    a, b = float(weights[tau]) / float(p_totals[tau]), 1.0 / float(q_totals[tau])
    token = -1
    if excess > 0.0:
        if paths > 1 and state[tau, 2] > 0:
            token = _skewed_draw(
                row_p, row_q, a, b, state[tau], paths, inverse, work, excess, u_token
            )
        else:
            token = _draw_terms(EXCESS, row_p, row_q, a, b, 0.0, 1.0, -1, 0.0, excess, u_token)
    if token < 0:  # nothing in excess (p_tau = q_tau at w_tau = 1): the target itself
        token = draw_scaled(row_p, float(p_totals[tau]), u_token)
    return tau, token


@nb.njit(cache=True)
def buckets_work(
    vocab: int,
) -> tuple[NDArray, NDArray[np.int8], NDArray, NDArray[np.int16], NDArray[np.int64]]:
    """Work arrays of the skewed excess: per bucket (p mass, q mass) (one more row: off the
    support), its kind, the q mass ranked below it; per token its bucket; the sorted tokens
    of the mixed buckets (their count in members[-1])."""
    return (
        np.zeros((BUCKETS + 1, 2)),
        np.zeros(BUCKETS, dtype=np.int8),
        np.zeros(BUCKETS),
        np.empty(vocab, dtype=np.int16),
        np.empty(vocab + 1, dtype=np.int64),
    )


@nb.njit(cache=True)
def _power(a: float, power: int) -> float:
    out = 1.0
    for _ in range(power):
        out *= a
    return out


@nb.njit(cache=True)
def _power_sum(a: float, b: float, power: int) -> float:
    """sum_{j < power} b^j a^(power - 1 - j), so that b^power - a^power = (b - a) * this."""
    total = 1.0  # Horner in a: s_{t+1} = s_t a + b^(t+1)
    b_power = 1.0
    for _ in range(power - 1):
        b_power *= b
        total = total * a + b_power
    return total


@nb.njit(cache=True, fastmath={"reassoc", "contract"}, error_model="numpy")
def _ranked_below(p: NDArray, q: NDArray, x: int, inverse: bool) -> float:
    """The draft mass (as given) of the support ranked strictly below token x: key p / q
    lower (higher with ``inverse``), or equal at a lower token id."""
    key = np.float64(p[x]) / np.float64(q[x])
    total = 0.0
    for i in range(p.shape[0]):
        y = np.float64(q[i])
        k = np.float64(p[i]) / y
        lower = (k > key) if inverse else (k < key)
        total += y if y > 0 and (lower or (k == key and i < x)) else 0.0
    return total


@nb.njit(cache=True)
def _bucket(ratio: float) -> int:
    """The key bucket of p / q >= 0 (monotone: the float's exponent and top mantissa bits)."""
    bits = int(np.float64(ratio).view(np.int64)) >> BUCKET_SHIFT
    return min(max(bits - BUCKET_BASE, 0), BUCKETS - 1)


@nb.njit(cache=True)
def _bucket_edge(bucket: int) -> float:
    """The smallest p / q of a bucket (0 for the first; inf past the last)."""
    if bucket <= 0:
        return 0.0
    if bucket >= BUCKETS:
        return np.inf
    return np.int64((bucket + BUCKET_BASE) << BUCKET_SHIFT).view(np.float64)


@nb.njit(cache=True, fastmath={"reassoc", "contract"}, error_model="numpy")
def _fill_buckets(
    p: NDArray, q: NDArray, a: float, b: float, hist: NDArray, ids: NDArray[np.int16]
) -> None:
    """hist[k] = (p mass, q mass) of key bucket k (scaled by a, b), ids[x] = x's bucket;
    bucket BUCKETS holds the tokens off the draft's support."""
    for i in range(p.shape[0]):  # vectorised; the scatter below is not
        y = np.float64(q[i])
        ids[i] = _bucket(np.float64(p[i]) / y) if y > 0 else BUCKETS
    hist[:] = 0.0
    for i in range(p.shape[0]):
        k = ids[i]
        hist[k, 0] += np.float64(p[i]) * a
        hist[k, 1] += np.float64(q[i]) * b


@nb.njit(cache=True)
def _level_excess(
    p: NDArray,
    q: NDArray,
    p_rows: NDArray[np.int64],
    q_rows: NDArray[np.int64],
    p_totals: NDArray[np.float64],
    q_totals: NDArray[np.float64],
    weights: NDArray[np.float64],
    state: NDArray[np.float64],
    paths: int,
    inverse: bool,
    i: int,
    work: tuple,
) -> float:
    """r_i = sum_x max(w_i p_i(x) - q_i(x), 0), q_i GBV's skewed draft when ``paths`` > 1."""
    row_p, row_q = p[p_rows[i]], q[q_rows[i]]
    a, b = weights[i] / p_totals[i], 1.0 / q_totals[i]
    if paths <= 1 or not state[i, 2] > 0:
        return _chunk_terms(EXCESS, row_p, row_q, 0, row_p.shape[0], a, b, 0.0, 1.0, -1, 0.0)
    return _skewed_excess(row_p, row_q, a, b, state[i], paths, inverse, work)


@nb.njit(cache=True)
def _skewed_excess(
    p: NDArray,
    q: NDArray,
    a: float,
    b: float,
    state: NDArray[np.float64],
    paths: int,
    inverse: bool,
    work: tuple,
) -> float:
    """sum_x max(a p(x) - q~(x), 0) with q~(x) = m b q(x) PS(lo, lo + m b q(x)) / parent,
    lo = S + m (draft mass ranked below x) ([GBV] Eq. 28; ``state`` = (S, m, parent)).

    One pass fills the key buckets; a bucket's terms are all positive when a p / q at its
    lowest key exceeds q~ / q at its highest rank (then they sum in closed form: the K-th
    powers telescope), all zero when a p / q at its highest key is below q~ / q at its lowest;
    the other (mixed) buckets' tokens are sorted and summed one by one. Leaves in ``work``
    (:func:`buckets_work`) what :func:`_skewed_draw` reads."""
    hist, kinds, low, ids, members = work
    below, mass, parent = state[0], state[1], state[2]
    _fill_buckets(p, q, a, b, hist, ids)
    total = hist[BUCKETS, 0]  # off the support q~ = 0
    under = 0.0
    scale = a / b  # a p / (b q) = scale * key
    mixed = False
    for t in range(BUCKETS):
        k = BUCKETS - 1 - t if inverse else t
        q_mass = hist[k, 1]
        kinds[k] = ZERO
        if not q_mass > 0:
            continue
        start, stop = below + mass * under, below + mass * (under + q_mass)
        low[k] = under
        under += q_mass
        least = mass * paths * _power(start, paths - 1) / parent  # q~ / q over the bucket
        most = mass * paths * _power(stop, paths - 1) / parent
        if scale * _bucket_edge(k) > most:
            kinds[k] = POSITIVE
            total += hist[k, 0] - mass * q_mass * _power_sum(start, stop, paths) / parent
        elif not scale * _bucket_edge(k + 1) <= least:
            kinds[k] = MIXED
            mixed = True
    count = _members(p, q, ids, kinds, MIXED, inverse, members) if mixed else 0
    members[-1] = count
    if count:
        total += _walk(p, q, a, b, state, paths, members[:count], ids, low, np.inf)[0]
    return total


@nb.njit(cache=True)
def _members(
    p: NDArray,
    q: NDArray,
    ids: NDArray[np.int16],
    kinds: NDArray[np.int8],
    kind: int,
    inverse: bool,
    out: NDArray[np.int64],
) -> int:
    """Write into ``out`` the support tokens in buckets of ``kind`` in ranking order (key,
    then token id); their count."""
    count = 0
    for i in range(ids.shape[0]):
        k = ids[i]
        if k < BUCKETS and kinds[k] == kind:
            out[count] = i
            count += 1
    keys = np.empty(count)
    for j in range(count):
        key = np.float64(p[out[j]]) / np.float64(q[out[j]])
        keys[j] = -key if inverse else key
    out[:count] = out[:count][np.argsort(keys, kind="mergesort")]  # stable: ties by token id
    return count


@nb.njit(cache=True)
def _walk(
    p: NDArray,
    q: NDArray,
    a: float,
    b: float,
    state: NDArray[np.float64],
    paths: int,
    members: NDArray[np.int64],
    ids: NDArray[np.int16],
    low: NDArray[np.float64],
    target: float,
) -> tuple[float, int, int]:
    """The positive terms max(a p(x) - q~(x), 0) of ``members`` (whole buckets in ranking
    order) summed in that order: (sum, the first token where it exceeds ``target`` or -1,
    the last token of positive term)."""
    below, mass, parent = state[0], state[1], state[2]
    acc = 0.0
    last = -1
    current = -1
    under = 0.0
    for x in members:
        if ids[x] != current:
            current = ids[x]
            under = low[current]
        lo = below + mass * under
        share = mass * np.float64(q[x]) * b
        term = np.float64(p[x]) * a - share * _power_sum(lo, lo + share, paths) / parent
        under += np.float64(q[x]) * b
        if term > 0.0:
            acc += term
            last = x
            if acc > target:
                return acc, x, last
    return acc, -1, last


@nb.njit(cache=True)
def _skewed_draw(
    p: NDArray,
    q: NDArray,
    a: float,
    b: float,
    state: NDArray[np.float64],
    paths: int,
    inverse: bool,
    work: tuple,
    excess: float,
    u: float,
) -> int:
    """An inverse-CDF draw from max(a p - q~, 0) (sum ``excess``; the buckets that
    :func:`_skewed_excess` left in ``work`` at this level): buckets in ranking order (a
    positive bucket by its closed-form sum, sorted only if the draw falls in it), then the
    tokens off the support."""
    hist, kinds, low, ids, members = work
    below, mass, parent = state[0], state[1], state[2]
    target = u * excess
    acc = 0.0
    last = -1
    mixed = members[: members[-1]].copy()
    start = 0
    for t in range(BUCKETS):
        k = BUCKETS - 1 - t if inverse else t
        if kinds[k] == POSITIVE:
            q_mass = hist[k, 1]
            lo, hi = below + mass * low[k], below + mass * (low[k] + q_mass)
            share = hist[k, 0] - mass * q_mass * _power_sum(lo, hi, paths) / parent
            if acc + share <= target:
                acc += share
                continue
            kinds[k] = POSITIVE + MIXED  # this bucket alone
            count = _members(p, q, ids, kinds, POSITIVE + MIXED, inverse, members)
            kinds[k] = POSITIVE
            chosen = members[:count]
        elif kinds[k] == MIXED:
            stop = start
            while stop < mixed.shape[0] and ids[mixed[stop]] == k:
                stop += 1
            chosen = mixed[start:stop]
            start = stop
        else:
            continue
        got, token, end = _walk(p, q, a, b, state, paths, chosen, ids, low, target - acc)
        acc += got
        if end >= 0:
            last = end
        if token >= 0:
            return token
    for i in range(p.shape[0]):  # off the support: a p
        if ids[i] == BUCKETS and p[i] > 0:
            acc += np.float64(p[i]) * a
            last = i
            if acc > target:
                return i
    return last


# Rules of :func:`node_token` / :func:`node_walk`.
REJECTION = 0  # recursive rejection sampling (sps: one draft), with or without replacement
KSEQ_RULE = 1  # SpecTr's K-SEQ
SPECHUB_RULE = 2  # SpecHub's hub pair (one draft: speculative sampling)


@nb.njit(cache=True)
def node_token(
    rule: int,
    p: NDArray,
    q: NDArray,
    p_total: float,
    q_total: float,
    omega: NDArray[np.int64],
    without_replacement: bool,
    u: NDArray[np.float64],
    work: NDArray[np.float64],
    removed: NDArray[np.bool_],
) -> int:
    """The token of ``rule`` at a node on rows ``p``, ``q`` as given (their sums ``p_total``,
    ``q_total``) for the drafts ``omega``: :func:`rejection_token`, :func:`kseq_token`, or
    :func:`hub_token` for a SpecHub pair (its first draft alone: speculative sampling).
    -1 when a SpecHub pair lacks the hub."""
    if rule == KSEQ_RULE:
        return kseq_token(p, q, 1.0 / p_total, 1.0 / q_total, omega, u)
    if rule == SPECHUB_RULE and omega.shape[0] == 2:
        return hub_token(p, q, 1.0 / p_total, 1.0 / q_total, omega, u)
    drafts = omega[:1] if rule == SPECHUB_RULE else omega
    return rejection_token(p, q, p_total, q_total, drafts, without_replacement, u, work, removed)


@nb.njit(cache=True)
def _checked_total(laws: NDArray, totals: NDArray[np.float64], b: int, c: int, atol: float) -> bool:
    """Fill ``totals[b, c]`` from the row once; False when the row fails its check."""
    if totals[b, c] >= 0.0:
        return True
    total, bad = row_total(laws[b, c])
    if bad >= 0 or abs(total - 1.0) > atol:
        return False
    totals[b, c] = total
    return True


@nb.njit(cache=True)
def node_walk(
    p: NDArray,
    q: NDArray,
    tokens: NDArray[np.int64],
    kid_start: NDArray[np.int64],
    kids: NDArray[np.int64],
    parents: NDArray[np.int64],
    rule: int,
    max_drafts: int,
    merge: bool,
    without_replacement: bool,
    u: NDArray[np.float64],
    width: int,
    atols: NDArray[np.float64],
    p_totals: NDArray[np.float64],
    q_totals: NDArray[np.float64],
    work: NDArray[np.float64],
    removed: NDArray[np.bool_],
    path_nodes: NDArray[np.int64],
    bonus: NDArray[np.int64],
    error: NDArray[np.int64],
) -> None:
    """Walk every row's draft tree with :func:`node_token` of ``rule`` at each node (the traversal
    of ``otlp.verification.tree``): the present children of the current nodes are the drafts
    (their first ``max_drafts``), a drafted child's token moves the walk there (``merge``:
    to all children carrying it, i.i.d. drafts), any other token ends it; a node without
    children draws the bonus token from p.

    ``p``, ``q`` (B, N + 1, V) are read only at the visited contexts, each checked once
    (sums into ``p_totals``/``q_totals``, -1 = unread; ``atols`` = the two tolerances).
    Children of context c are ``kids[kid_start[c]:kid_start[c + 1]]``. Row b's uniforms
    ``u[b]`` give ``width`` per level. Writes ``path_nodes`` (B, D; -1 padded) and ``bonus``;
    on bad input stops and writes ``error`` = (code, row, context, token or count, second token);
    the codes are :class:`otlp.solvers.row_status.RowStatus`'s (0: none).
    """
    rows = tokens.shape[0]
    nodes = max(tokens.shape[1], 1)
    state = np.empty(nodes, dtype=np.int64)
    following = np.empty(nodes, dtype=np.int64)
    cands = np.empty(nodes, dtype=np.int64)
    omega = np.empty(nodes, dtype=np.int64)
    for b in range(rows):
        state[0] = -1
        size = 1
        level = 0
        while True:
            count = 0
            for s in range(size):
                c = state[s] + 1
                for k in range(kid_start[c], kid_start[c + 1]):
                    if tokens[b, kids[k]] >= 0:
                        cands[count] = kids[k]
                        count += 1
            context = state[0] + 1
            if not _checked_total(p, p_totals, b, context, atols[0]):
                error[:] = (BAD_TARGET_ROW, b, context, -1, -1)
                return
            mine = u[b, level * width : (level + 1) * width]
            if count == 0:
                y = draw_scaled(p[b, context], p_totals[b, context], mine[0])
                break
            if not _checked_total(q, q_totals, b, context, atols[1]):
                error[:] = (BAD_DRAFT_ROW, b, context, -1, -1)
                return
            for j in range(count):
                omega[j] = tokens[b, cands[j]]
                if not q[b, context, omega[j]] > 0:
                    error[:] = (BAD_DRAFT, b, context, omega[j], -1)
                    return
                if without_replacement:
                    for i in range(j):
                        if omega[i] == omega[j]:
                            error[:] = (REPEATED, b, context, omega[j], -1)
                            return
            if rule == SPECHUB_RULE and count > 2:
                error[:] = (TOO_MANY, b, context, count, -1)
                return
            y = node_token(
                rule,
                p[b, context],
                q[b, context],
                p_totals[b, context],
                q_totals[b, context],
                omega[: min(count, max_drafts)],
                without_replacement,
                mine,
                work,
                removed,
            )
            if y < 0:
                error[:] = (NOT_HUB, b, context, omega[0], omega[1])
                return
            matched = 0
            for j in range(count):
                if omega[j] == y and (merge or matched == 0):
                    following[matched] = cands[j]
                    matched += 1
            if matched == 0:
                break
            state[:matched] = following[:matched]
            size = matched
            level += 1
        bonus[b] = y
        last = state[0]
        depth = 0
        walk = last
        while walk >= 0:
            depth += 1
            walk = parents[walk]
        walk = last
        for d in range(depth - 1, -1, -1):
            path_nodes[b, d] = walk
            walk = parents[walk]


@nb.njit(cache=True)
def block_walk(
    p: NDArray,
    q: NDArray,
    tokens: NDArray[np.int64],
    u: NDArray[np.float64],
    atols: NDArray[np.float64],
    p_totals: NDArray[np.float64],
    q_totals: NDArray[np.float64],
    path_nodes: NDArray[np.int64],
    bonus: NDArray[np.int64],
    error: NDArray[np.int64],
) -> None:
    """Block verification ([GBV] §2.1) of every row's chain by :func:`path_token`: row b's
    drafted chain is its present tokens (a prefix of ``tokens[b]``), its laws ``p[b, i]``,
    ``q[b, i]`` at contexts i < L (``q`` may lack the last context), checked once each
    (sums into ``p_totals``/``q_totals``); the row after the chain is read only when the
    whole chain is accepted. Uniforms ``u[b, 0]``, ``u[b, 1]``. Writes ``path_nodes`` (B, D;
    -1 padded) and ``bonus``; on bad input stops and writes ``error`` = (code, row, context,
    token, -1) (code BAD_DRAFT: context = the node)."""
    work = buckets_work(0)
    for b in range(tokens.shape[0]):
        steps = 0
        while steps < tokens.shape[1] and tokens[b, steps] >= 0:
            steps += 1
        for i in range(steps):
            if not _checked_total(p, p_totals, b, i, atols[0]):
                error[:] = (BAD_TARGET_ROW, b, i, -1, -1)
                return
            if not _checked_total(q, q_totals, b, i, atols[1]):
                error[:] = (BAD_DRAFT_ROW, b, i, -1, -1)
                return
            if not q[b, i, tokens[b, i]] > 0:
                error[:] = (BAD_DRAFT, b, i, tokens[b, i], -1)
                return
        tau, token = steps, -1
        if steps:
            rows = np.arange(steps)
            tau, token = path_token(
                p[b], q[b], rows, rows, p_totals[b, :steps], q_totals[b, :steps],
                tokens[b, :steps], 1, False, work, u[b, 0], u[b, 1],
            )  # fmt: skip
        if token < 0:  # no drafts, or the whole chain accepted: the target after it
            if not _checked_total(p, p_totals, b, tau, atols[0]):
                error[:] = (BAD_TARGET_ROW, b, tau, -1, -1)
                return
            token = draw_scaled(p[b, tau], p_totals[b, tau], u[b, 1 if steps else 0])
        for d in range(tau):
            path_nodes[b, d] = d
        bonus[b] = token


ROUNDING = 4 * float(np.finfo(np.float64).eps)  # relative slack of K-SEQ's validity test
RHO_PASSES = 200  # passes of the rho* search at most (bisection's worst case)


@nb.njit(cache=True)
def any_accepted(beta: float, miss: float, n: int) -> float:
    """1 - (1 - beta)^n = 1 - miss^n without cancellation at either end."""
    if not miss > 0:
        return 1.0
    log_miss = np.log1p(-beta) if beta < 0.5 else np.log(miss)
    return -np.expm1(n * log_miss)


@nb.njit(cache=True, fastmath={"reassoc", "contract"})
def _beta_sums(
    p: NDArray, q: NDArray, a: float, b: float, inverse: float
) -> tuple[float, float, float, float, float, int]:
    """At rho = 1 / ``inverse``: beta = sum_x min(q(x), p(x) / rho) and its complement
    sum_x q(x) - min(...) (from its own nonnegative terms), and the partition the two are
    linear in: the q mass where q(x) <= p(x) / rho and its count, the p and q masses of the
    rest (p = p[i] a, q = q[i] b)."""
    beta = 0.0
    miss = 0.0
    capped = 0.0
    p_rest = 0.0
    q_rest = 0.0
    count = 0
    for i in range(p.shape[0]):
        x = np.float64(p[i]) * a
        y = np.float64(q[i]) * b
        t = x * inverse
        accepted = min(y, t)
        beta += accepted
        miss += y - accepted
        whole = y <= t
        capped += y if whole else 0.0
        count += 1 if whole else 0
        p_rest += 0.0 if whole else x
        q_rest += 0.0 if whole else y
    return beta, miss, capped, p_rest, q_rest, count


@nb.njit(cache=True)
def kseq_beta_pass(p: NDArray, q: NDArray, rho: float) -> tuple[float, float]:
    """SpecTr's K-SEQ (beta(rho), 1 - beta(rho)) in one pass: beta = sum_x min(q(x),
    p(x) / rho), its complement summed from its own nonnegative terms q(x) - min(...)."""
    sums = _beta_sums(p, q, 1.0, 1.0, 1.0 / rho)
    return sums[0], sums[1]


@nb.njit(cache=True)
def _valid(beta: float, miss: float, rho: float, n: int) -> bool:
    """K-SEQ's residual is nonnegative at rho: 1 - (1 - beta)^n <= rho beta (a few ulps of
    slack: with p = q, beta(1) sums to 1 - 1 ulp and rho = 1 was refused)."""
    return any_accepted(beta, miss, n) <= rho * beta * (1.0 + ROUNDING)


@nb.njit(cache=True)
def _model_root(capped: float, p_rest: float, q_rest: float, n: int, lo: float, hi: float) -> float:
    """The smallest valid rho in (lo, hi] where beta(rho) = capped + p_rest / rho (the
    partition of one pass, exact until rho crosses a ratio p(x) / q(x)), by bisection on
    that closed form."""
    for _ in range(RHO_PASSES):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        tail = p_rest / mid
        if _valid(capped + tail, max(q_rest - tail, 0.0), mid, n):
            hi = mid
        else:
            lo = mid
    return hi


@nb.njit(cache=True)
def _slack(beta: float, miss: float, rho: float, n: int) -> float:
    """rho beta - (1 - (1 - beta)^n), increasing in rho; valid where >= 0 (with slack)."""
    return rho * beta * (1.0 + ROUNDING) - any_accepted(beta, miss, n)


@nb.njit(cache=True)
def kseq_rho(p: NDArray, q: NDArray, a: float, b: float, n: int) -> tuple[float, float, float]:
    """K-SEQ's rho* = the smallest valid rho in [1, n] (1 - (1 - beta)^n <= rho beta; 1 if
    rho = 1 is valid), with beta(rho*) and 1 - beta(rho*), on the rows p[i] a, q[i] b.

    The bracket [invalid, valid] shrinks by regula falsi (Illinois) on the slack
    rho beta - (1 - (1 - beta)^n), bisection where that is slow. Each pass also returns the
    partition of the tokens by p(x) / q(x) >= rho, beta being A + B / rho on one piece; once
    both ends of the bracket lie on one piece, that closed form's root is rho*: a few passes
    over the rows instead of ~50 of a plain bisection."""
    sums = _beta_sums(p, q, a, b, 1.0)
    if _valid(sums[0], sums[1], 1.0, n):
        return 1.0, sums[0], sums[1]
    lo, hi = 1.0, float(n)
    f_lo = _slack(sums[0], sums[1], 1.0, n)
    f_hi = n * 1.0  # unknown until evaluated; n is valid
    lo_sums = sums
    hi_count = -1
    hi_beta, hi_miss = -1.0, -1.0
    side = 0
    for _ in range(RHO_PASSES):
        width = hi - lo
        if not width > 4.0 * ROUNDING * hi:
            break
        if lo_sums[5] == hi_count:  # one piece spans [lo, hi]: its root is rho*, to rounding
            # the closed form's root, a few ulps up: on the valid side despite rounding
            rho = _model_root(lo_sums[2], lo_sums[3], lo_sums[4], n, lo, hi) * (1.0 + ROUNDING)
            nudge = ROUNDING
            while lo < rho < hi:
                sums = _beta_sums(p, q, a, b, 1.0 / rho)
                if _valid(sums[0], sums[1], rho, n):
                    return rho, sums[0], sums[1]
                rho *= 1.0 + nudge  # invalid by a rounding error: step up
                nudge *= 4.0
            break
        rho = hi - f_hi * width / (f_hi - f_lo) if hi_count >= 0 else 0.5 * (lo + hi)
        if not lo < rho < hi:
            rho = 0.5 * (lo + hi)
        sums = _beta_sums(p, q, a, b, 1.0 / rho)
        slack = _slack(sums[0], sums[1], rho, n)
        if slack >= 0.0:
            hi, f_hi, hi_count, hi_beta, hi_miss = rho, slack, sums[5], sums[0], sums[1]
            if side == 1:
                f_lo *= 0.5  # Illinois: the end kept twice counts half
            side = 1
        else:
            lo, f_lo, lo_sums = rho, slack, sums
            if side == -1:
                f_hi *= 0.5
            side = -1
    if hi_beta < 0.0:
        sums = _beta_sums(p, q, a, b, 1.0 / hi)
        hi_beta, hi_miss = sums[0], sums[1]
    return hi, hi_beta, hi_miss


@nb.njit(cache=True)
def kseq_token(
    p: NDArray, q: NDArray, a: float, b: float, omega: NDArray[np.int64], u: NDArray
) -> int:
    """SpecTr's K-SEQ at a node ([GR]'s baseline; docs/design.md) on rows p[i] a, q[i] b for
    the i.i.d. drafts ``omega`` with uniforms ``u`` (n + 1): draft j is accepted when
    u_j < min(1, p(x_j) / (rho* q(x_j))); after n rejections the token is drawn from
    max(p - c min(q, p / rho*), 0), c = (1 - (1 - beta)^n) / beta (p itself when nothing is
    left). Reads the drafts' entries, the passes of :func:`kseq_rho` and, after n
    rejections, the residual."""
    n = omega.shape[0]
    rho, beta, miss = 1.0, 1.0, 0.0
    if n > 1:  # one draft: rho = 1 is valid (1 - (1 - beta) = beta), c = 1
        rho, beta, miss = kseq_rho(p, q, a, b, n)
    c = any_accepted(beta, miss, n) / beta if beta > 0 else float(n)  # limit n as beta -> 0
    for j in range(n):
        x = omega[j]
        if u[j] < min(1.0, np.float64(p[x]) * a / rho / (np.float64(q[x]) * b)):
            return x
    return kseq_residual_token(p, q, a, b, rho, c, float(u[n]))


@nb.njit(cache=True)
def kseq_residual_token(
    p: NDArray, q: NDArray, a: float, b: float, rho: float, c: float, u: float
) -> int:
    """K-SEQ's residual draw after n rejections: inverse CDF of max(p - c min(q, p / rho), 0)
    on rows p[i] a, q[i] b (p itself when nothing is left), in two passes, nothing stored."""
    vocab = p.shape[0]
    left = _chunk_terms(KSEQ, p, q, 0, vocab, a, b, c, rho, -1, 0.0)
    token = -1
    if left > 0.0:
        token = _draw_terms(KSEQ, p, q, a, b, c, rho, -1, 0.0, left, u)
    if token < 0:
        token = draw_scaled(p, _chunk_sum(p, 0, vocab, 1.0), u)
    return token


@nb.njit(cache=True)
def _hub(q: NDArray, b: float) -> tuple[int, float]:
    """(argmax of q, the first of ties; the draft mass of the other tokens, summed: 1 - q(a)
    cancels when q(a) is near 1)."""
    best = 0
    top = np.float64(q[0])
    for i in range(1, q.shape[0]):
        if np.float64(q[i]) > top:
            top = np.float64(q[i])
            best = i
    rest = _chunk_sum(q, 0, best, b) + _chunk_sum(q, best + 1, q.shape[0], b)
    return best, rest


@nb.njit(cache=True, fastmath={"reassoc", "contract"})
def _hub_sums(
    p: NDArray, q: NDArray, a: float, b: float, share: float, hub: int
) -> tuple[float, float, float]:
    """Over x != hub: the leftover draft masses sum max(q - p, 0) (pairs (x, a)) and
    sum max(Q(a, x) - max(p - q, 0), 0) (pairs (a, x), Q(a, x) = ``share`` q(x)), and the
    final residual's mass sum max(max(p - q, 0) - Q(a, x), 0)."""
    left_xa = 0.0
    left_ax = 0.0
    final = 0.0
    for i in range(p.shape[0]):
        x = np.float64(p[i]) * a
        y = np.float64(q[i]) * b
        p1 = max(x - y, 0.0)
        y_ax = share * y
        off = i != hub
        left_xa += max(y - x, 0.0) if off else 0.0
        left_ax += max(y_ax - p1, 0.0) if off else 0.0
        final += max(p1 - y_ax, 0.0) if off else 0.0
    return left_xa, left_ax, final


@nb.njit(cache=True)
def hub_token(
    p: NDArray, q: NDArray, a: float, b: float, omega: NDArray[np.int64], u: NDArray
) -> int:
    """[SpecHub] Algorithm 3 (otlp.rules.spechub) on the drafted pair ``omega`` at a node,
    rows p[i] a, q[i] b, uniforms ``u`` (3): the non-hub draft x first, accepted with
    min(1, p(x) / q(x)) in pair (x, a) or min(1, p'(x) / Q(a, x)) in pair (a, x), then the hub
    a = argmax q with its leftover acceptance, else a draw from the final residual. Reads
    the argmax pass and, after x's rejection, one pass for the leftovers (and one for the
    draw). -1 when the pair lacks the hub."""
    hub, rest = _hub(q, b)
    if omega[0] != hub and omega[1] != hub:
        return -1
    hub_second = omega[1] == hub
    x = omega[0] if hub_second else omega[1]
    px, qx = np.float64(p[x]) * a, np.float64(q[x]) * b
    vocab = p.shape[0]
    if not rest > 0:  # one-hot draft: the only pair is (a, a), speculative sampling on it
        if u[0] < (min(1.0, px / qx) if qx > 0 else 1.0):
            return x
        left = _chunk_terms(EXCESS, p, q, 0, vocab, a, b, 0.0, 1.0, -1, 0.0)
        token = -1
        if left > TINY:
            token = _draw_terms(EXCESS, p, q, a, b, 0.0, 1.0, -1, 0.0, left, u[2])
        return token if token >= 0 else draw_scaled(p, _chunk_sum(p, 0, vocab, 1.0), u[2])
    q_hub = np.float64(q[hub]) * b
    share = q_hub / rest  # Q(a, x) = q(a) q(x) / (1 - q(a))
    if x == hub:  # Q(x, a) = 0 there: accepted (a pair of draft probability 0)
        accept = 1.0
    elif hub_second:
        accept = min(1.0, px / qx) if qx > 0 else 1.0
    else:
        q_ax = q_hub * (qx / rest)
        accept = min(1.0, max(px - qx, 0.0) / q_ax) if q_ax > 0 else 1.0
    if u[0] < accept:
        return x
    left_xa, left_ax, final = _hub_sums(p, q, a, b, share, hub)
    p_hub = np.float64(p[hub]) * a
    after_second = min(1.0, p_hub / left_ax) if left_ax > 0 else 1.0
    p1_hub = max(p_hub - left_ax, 0.0)
    after_first = min(1.0, p1_hub / left_xa) if left_xa > 0 else 1.0
    if u[1] < (after_first if hub_second else after_second):
        return hub
    p2_hub = max(p1_hub - left_xa, 0.0)
    final += p2_hub
    token = -1
    if final > TINY:
        token = _draw_terms(HUB, p, q, a, b, share, 1.0, hub, p2_hub, final, u[2])
    return token if token >= 0 else draw_scaled(p, _chunk_sum(p, 0, vocab, 1.0), u[2])
