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

They import nothing from ``otlp``; :mod:`otlp.verification.node_rows` calls them.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numpy.typing import NDArray

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


@nb.njit(cache=True)
def draw_scaled(row: NDArray, total: float, u: float) -> int:
    """The first index whose running sum of ``row`` exceeds ``u * total`` (the draw of
    ``otlp.verification.tree.draw``: never a token of zero mass)."""
    target = u * total
    acc = 0.0
    last = -1
    for i in range(row.shape[0]):
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
