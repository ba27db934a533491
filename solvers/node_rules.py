"""One-pass kernels for verifying a draft-tree node on the caller's own rows (numba).

A decoder hands over its softmax rows in float32 (or float64); verifying a node of a draft
tree needs at most a few passes over them: one to check a row (finite, nonnegative, its sum),
and, for the rejection rules, one residual pass per rejected draft and one inverse-CDF pass
for the token drawn after the last rejection. These kernels read the rows in their own dtype
and do the arithmetic in float64 element by element, so no float64 copy of a row is made.

* :func:`row_total` — a row's sum and the first entry that is negative, NaN or infinite.
* :func:`rejection_token` — recursive rejection sampling ([SpecHub] Algorithm 1), with or
  without replacement, one draft = speculative sampling; draft j is accepted when
  u_j q_j(x_j) < p_j(x_j), and only a rejection computes the residual
  p_{j+1} = norm(max(p_j - q_j, 0)) (without replacement q_{j+1} is q_j with x_j removed,
  renormalised by the sum of the rest, never by 1 - q_j(x_j)).
* :func:`draw_scaled` — an inverse-CDF draw from ``row / total`` with one uniform.
* :func:`block_token` — block verification of one drafted path ([GBV] §2.1): one pass per
  prefix for its excess mass r_i, the stop law drawn, one pass for the correction token.

They import nothing from ``otlp``; :mod:`otlp.verification.node_rows` calls them.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numpy.typing import NDArray

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


@nb.njit(cache=True, fastmath={"reassoc", "contract"})
def _excess(p: NDArray, q: NDArray, p_scale: float, q_scale: float) -> float:
    """sum_x max(p(x) p_scale - q(x) q_scale, 0)."""
    return _chunk_excess(p, q, 0, p.shape[0], p_scale, q_scale)


@nb.njit(cache=True, fastmath={"reassoc", "contract"})
def _chunk_excess(
    p: NDArray, q: NDArray, start: int, stop: int, p_scale: float, q_scale: float
) -> float:
    """sum over [start, stop) of max(p(x) p_scale - q(x) q_scale, 0). (The scales come in as
    arguments: computed inside, LLVM left this loop unvectorised, 6x slower.)"""
    left = 0.0
    for i in range(start, stop):
        left += max(np.float64(p[i]) * p_scale - np.float64(q[i]) * q_scale, 0.0)
    return left


@nb.njit(cache=True)
def _draw_excess(
    p: NDArray, q: NDArray, p_scale: float, q_scale: float, left: float, u: float
) -> int:
    """An inverse-CDF draw from max(p p_scale - q q_scale, 0) (its sum ``left``), chunked as
    :func:`draw_scaled`."""
    target = u * left
    acc = 0.0
    last = -1
    vocab = p.shape[0]
    for start in range(0, vocab, CHUNK):
        stop = min(start + CHUNK, vocab)
        mass = _chunk_excess(p, q, start, stop, p_scale, q_scale)
        if mass > 0.0 and acc + mass <= target:
            acc += mass
            for i in range(stop - 1, start - 1, -1):
                if np.float64(p[i]) * p_scale - np.float64(q[i]) * q_scale > 0.0:
                    last = i
                    break
            continue
        for i in range(start, stop):
            r = np.float64(p[i]) * p_scale - np.float64(q[i]) * q_scale
            if r > 0.0:
                last = i
                acc += r
                if acc > target:
                    return i
    return last


@nb.njit(cache=True)
def block_token(
    p: NDArray,
    q: NDArray,
    p_rows: NDArray[np.int64],
    q_rows: NDArray[np.int64],
    p_totals: NDArray[np.float64],
    q_totals: NDArray[np.float64],
    path: NDArray[np.int64],
    u_stop: float,
    u_token: float,
) -> tuple[int, int]:
    """Block verification ([GBV] §2.1, Eqs. 4-7) of one drafted path, sampled.

    ``p[p_rows[i]]``, ``q[q_rows[i]]`` (sums ``p_totals[i]``, ``q_totals[i]``) are the
    target and draft laws after the path's first i tokens, i < L = ``path.shape[0]``. Weights
    w_0 = 1, w_{i+1} = min(w_i p_i(x_i) / q_i(x_i), 1); h_i = r_i / (r_i + 1 - w_i) with
    r_i = sum_x max(w_i p_i(x) - q_i(x), 0) (1 when the denominator is 0), h_L = w_L; the stop
    law P(tau = i) = h_i prod_{j > i} (1 - h_j) is drawn by inverse CDF with ``u_stop``.
    Returns (tau, the correction token drawn with ``u_token`` from max(w_tau p_tau - q_tau, 0)),
    or (L, -1): the caller draws the bonus token from the target after the whole path.
    """
    steps = path.shape[0]
    weights = np.ones(steps + 1)
    for i in range(steps):
        x = path[i]
        ratio = (np.float64(p[p_rows[i], x]) / p_totals[i]) / (
            np.float64(q[q_rows[i], x]) / q_totals[i]
        )
        weights[i + 1] = min(weights[i] * ratio, 1.0)
    h = np.empty(steps + 1)
    excess = np.empty(steps)
    for i in range(steps):
        r = _excess(p[p_rows[i]], q[q_rows[i]], weights[i] / p_totals[i], 1.0 / q_totals[i])
        excess[i] = r
        denom = r + 1.0 - weights[i]
        h[i] = min(r / denom, 1.0) if denom > 0 else 1.0
    h[steps] = weights[steps]
    stop = np.empty(steps + 1)
    later = 1.0
    for i in range(steps, -1, -1):
        stop[i] = h[i] * later
        later *= 1.0 - h[i]
    tau = draw_scaled(stop, stop.sum(), u_stop)
    if tau == steps:
        return tau, -1
    target, draft = p[p_rows[tau]], q[q_rows[tau]]
    p_scale = weights[tau] / p_totals[tau]
    token = _draw_excess(target, draft, p_scale, 1.0 / q_totals[tau], excess[tau], u_token)
    if token < 0:  # nothing in excess (p_tau = q_tau at w_tau = 1): the target itself
        token = draw_scaled(target, p_totals[tau], u_token)
    return tau, token


# Error codes of :func:`rejection_walk` (0: none).
BAD_TARGET = 1  # the target row at (row, context) fails its check
BAD_DRAFT = 2  # the draft row at (row, context) fails its check
ZERO_DRAFT = 3  # a drafted token has draft probability 0 at its context
REPEATED = 4  # drafts without replacement repeat a token


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
def rejection_walk(
    p: NDArray,
    q: NDArray,
    tokens: NDArray[np.int64],
    kid_start: NDArray[np.int64],
    kids: NDArray[np.int64],
    parents: NDArray[np.int64],
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
    """Walk every row's draft tree with :func:`rejection_token` at each node (the traversal
    of ``otlp.verification.tree``): the present children of the current nodes are the drafts
    (their first ``max_drafts``), a drafted child's token moves the walk there (``merge``:
    to all children carrying it, i.i.d. drafts), any other token ends it; a node without
    children draws the bonus token from p.

    ``p``, ``q`` (B, N + 1, V) are read only at the visited contexts, each checked once
    (sums into ``p_totals``/``q_totals``, -1 = unread; ``atols`` = the two tolerances).
    Children of context c are ``kids[kid_start[c]:kid_start[c + 1]]``. Row b's uniforms
    ``u[b]`` give ``width`` per level. Writes ``path_nodes`` (B, D; -1 padded) and ``bonus``;
    on bad input stops and writes ``error`` = (code, row, context, token).
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
                error[:] = (BAD_TARGET, b, context, -1)
                return
            mine = u[b, level * width : (level + 1) * width]
            if count == 0:
                y = draw_scaled(p[b, context], p_totals[b, context], mine[0])
                break
            if not _checked_total(q, q_totals, b, context, atols[1]):
                error[:] = (BAD_DRAFT, b, context, -1)
                return
            for j in range(count):
                omega[j] = tokens[b, cands[j]]
                if not q[b, context, omega[j]] > 0:
                    error[:] = (ZERO_DRAFT, b, context, omega[j])
                    return
                if without_replacement:
                    for i in range(j):
                        if omega[i] == omega[j]:
                            error[:] = (REPEATED, b, context, omega[j])
                            return
            y = rejection_token(
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


@nb.njit(cache=True, fastmath={"reassoc", "contract"})
def _beta_sums(p: NDArray, q: NDArray, inverse: float) -> tuple[float, float]:
    beta = 0.0
    miss = 0.0
    for i in range(p.shape[0]):
        qi = np.float64(q[i])
        accepted = min(qi, np.float64(p[i]) * inverse)
        beta += accepted
        miss += qi - accepted
    return beta, miss


@nb.njit(cache=True)
def kseq_beta_pass(p: NDArray, q: NDArray, rho: float) -> tuple[float, float]:
    """SpecTr's K-SEQ (beta(rho), 1 - beta(rho)) in one pass: beta = sum_x min(q(x),
    p(x) / rho), its complement summed from its own nonnegative terms q(x) - min(...)."""
    return _beta_sums(p, q, 1.0 / rho)


@nb.njit(cache=True, fastmath={"reassoc", "contract"})
def _kseq_left(p: NDArray, q: NDArray, rho: float, c: float) -> float:
    left = 0.0
    for i in range(p.shape[0]):
        x = np.float64(p[i])
        left += max(x - c * min(np.float64(q[i]), x / rho), 0.0)
    return left


@nb.njit(cache=True)
def kseq_residual_token(p: NDArray, q: NDArray, rho: float, c: float, u: float) -> int:
    """K-SEQ's residual draw after n rejections: inverse CDF of max(p - c min(q, p / rho), 0)
    (p itself when nothing is left), in two passes and nothing stored."""
    left = _kseq_left(p, q, rho, c)
    if not left > 0.0:
        return draw_scaled(p, _chunk_sum(p, 0, p.shape[0], 1.0), u)
    target = u * left
    acc = 0.0
    last = -1
    for i in range(p.shape[0]):
        x = np.float64(p[i])
        r = x - c * min(np.float64(q[i]), x / rho)
        if r > 0.0:
            last = i
            acc += r
            if acc > target:
                return i
    return last
