"""Partial resolution per decoder row, fused: full-vocabulary (p, q, drafts) to a token.

"Partial Resolution: Optimal Multi-Draft Speculative Sampling in Near-Linear Time" (R. Thomas
and A. Pal, NeurIPS 2025; abstract only) announces exact optimal transport per token for n
i.i.d. drafts. This is otlp's construction (docs/partial-resolution.md, Lemmas 1-5) as one
compiled pass per row, nothing materialised that the drafts do not read:

1. the checks and the draft's top k (:func:`otlp.solvers.global_resolution.token.scan`,
   :func:`~otlp.solvers.global_resolution.sorting.top_tokens`, O(V)) and the restricted rows
   ([GR] Appendix N, :func:`~otlp.solvers.global_resolution.token.restrict`);
2. H* by the prefix rule of the q/p order and the accepted masses A: p on H*, the outer
   targets with their tight blocks elsewhere ([GR] Theorems 3.1 and 6.2;
   :func:`accepted_targets_kernel`, the one implementation the object API uses too);
3. gap filling (Lemma 3) of the drafted tokens' segments only, in each only up to its last
   drafted token, runs of undrafted tokens in one stretch where that leaves the same free
   part (:func:`~otlp.solvers.partial_resolution.clock_pieces_of`): a token's set depends only on
   the free part the tokens before it in its own segment leave;
4. the clock race of the drafts (Lemma 4, :func:`~otlp.solvers.partial_resolution.clock_winner`)
   and, on rejection, the residual p - A (drawn over the draft vocabulary plus the outside
   row, :func:`~otlp.solvers.global_resolution.token.draw`).

The token's law given the drafted tuple is the tuple-level refinement of the object API's
set conditional (``otlp.solve(inst, "partial_resolution").slice``): same H*, same targets,
same partition to rounding, so the two agree to float64 rounding (no tolerance, no
iteration decides the law).
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numpy.typing import NDArray

from otlp.solvers.arrays import FloatArray, IntArray
from otlp.solvers.global_resolution.polymatroid import target_blocks
from otlp.solvers.global_resolution.sorting import stable_argsort, top_tokens
from otlp.solvers.global_resolution.token import draw, local_drafts, restrict, scan
from otlp.solvers.partial_resolution import clock_pieces_of, clock_winner
from otlp.solvers.row_status import BAD_DRAFT, OK


@nb.njit(cache=True)
def accepted_targets_kernel(
    p_local: FloatArray, q_local: FloatArray, n: int
) -> tuple[FloatArray, IntArray, IntArray, float]:
    """``(A, order, segment_ends, 1 - alpha*)`` over the draft vocabulary for n i.i.d. drafts.

    H* is the shortest best prefix of the decreasing-q/p order (p = 0 first, ties by
    position; [GR] Theorem 3.1, ``otlp.subset``'s rule), ``1 - alpha* = -psi(H*) =
    q(H*)^n - p(H*)`` taken from psi itself (never 1 - a rounded alpha*). A = p on H*, the
    [GR] Theorem 6.2 targets elsewhere. ``order`` lists each tight block of the outer system
    by decreasing q/p, then H* by decreasing q/p (the gap-filling order of Lemma 3);
    ``segment_ends`` closes each block and H*.
    """
    k = p_local.shape[0]
    keys = np.empty(k)
    for j in range(k):
        keys[j] = -(q_local[j] / p_local[j]) if p_local[j] > 0 else -np.inf
    ratio = stable_argsort(keys)
    best, psi_min = 0, 0.0
    p_prefix, q_prefix = 0.0, 0.0
    for j in range(k):
        p_prefix += p_local[ratio[j]]
        q_prefix += q_local[ratio[j]]
        value = p_prefix - q_prefix**n
        if value < psi_min:  # strict: the first (shortest) minimiser
            best, psi_min = j + 1, value
    accepted = np.zeros(k)
    p_inside, q_inside = 0.0, 0.0
    for j in range(best):
        accepted[ratio[j]] = p_local[ratio[j]]
        p_inside += p_local[ratio[j]]
        q_inside += q_local[ratio[j]]
    outside = ratio[best:][::-1].copy()  # increasing q/p
    targets, starts, ends, _, _ = target_blocks(p_local, q_local, outside, p_inside, q_inside, n)
    for i in range(outside.shape[0]):
        accepted[outside[i]] = targets[i]
    order = np.empty(k, dtype=np.int64)
    at = 0
    for b in range(starts.shape[0]):
        for i in range(ends[b] - 1, starts[b] - 1, -1):
            order[at] = outside[i]
            at += 1
    for j in range(best):
        order[at] = ratio[j]
        at += 1
    segments = starts.shape[0] + (1 if best > 0 else 0)
    segment_ends = np.empty(segments, dtype=np.int64)
    segment_ends[: starts.shape[0]] = ends
    if best > 0:
        segment_ends[segments - 1] = k
    return accepted, order, segment_ends, -psi_min


@nb.njit(cache=True)
def drafted_partition(
    p_local: FloatArray, q_local: FloatArray, n: int, local: IntArray
) -> tuple[FloatArray, FloatArray, FloatArray, IntArray, IntArray, float]:
    """``(A, starts, ends, first, last, cut)``: the clock partition's pieces of the tokens in
    ``local`` (draft-vocabulary positions, any shape) and of the tokens gap filling takes one
    by one on the way to them; every other token (after them, or in a run filled as one
    stretch) has no pieces (``first == last``)."""
    accepted, order, segment_ends, rejection = accepted_targets_kernel(p_local, q_local, n)
    cut = 1.0 - max(rejection, 0.0) ** (1.0 / n)
    needed = np.zeros(p_local.shape[0], dtype=np.bool_)
    for x in local.ravel():
        needed[x] = True
    starts, ends, first, last = clock_pieces_of(
        q_local, accepted, order, segment_ends, needed, n, cut
    )
    return accepted, starts, ends, first, last, cut


@nb.njit(cache=True)
def _rows(
    p: NDArray,
    q: NDArray,
    drafts: NDArray,
    top_k: int,
    atol: float,
    uniforms: FloatArray,
    out: IntArray,
    table: FloatArray,
) -> None:
    """Every row of ``drafts`` against one (p, q) pair: one partition, filled as far as the
    union of the rows' drafts needs, then one race per row. Writes tokens into ``out`` and
    (status, offending draw) into ``table``; stops at the first bad row."""
    rows, n = drafts.shape
    status, p_sum, q_sum = scan(p, q, atol)
    if status != OK:
        table[0, 0] = status
        return
    tokens = top_tokens(q, top_k)
    local = np.empty((rows, n), dtype=np.int64)
    for b in range(rows):
        local[b] = local_drafts(tokens, drafts[b])
        for d in range(n):
            if local[b, d] < 0:
                table[b, 0] = BAD_DRAFT
                table[b, 1] = d
                return
    p_local, q_local, p_outside = restrict(p, q, tokens, p_sum, q_sum)
    accepted, starts, ends, first, last, cut = drafted_partition(p_local, q_local, n, local)
    k = tokens.shape[0]
    residual = np.empty(k + 1)  # p - A over the draft vocabulary, then the outside row
    for j in range(k):
        residual[j] = max(p_local[j] - accepted[j], 0.0)
    residual[k] = p_outside
    for b in range(rows):
        j = clock_winner(local[b], uniforms[b, :n], starts, ends, first, last, cut)
        # a token with A = 0 lies past the cut in exact arithmetic: it wins only by rounding
        if j >= 0 and accepted[local[b, j]] > 0:
            out[b] = tokens[local[b, j]]
        else:
            out[b] = draw(residual, p, tokens, uniforms[b, n], uniforms[b, n + 1])


@nb.njit(cache=True)
def _same(rows: NDArray, row: NDArray, b: int) -> bool:
    """Whether ``rows[b]`` is ``row`` (a shared (1, V) row is every row's; a NaN equals
    nothing, so a bad row is never grouped and its own scan reports it)."""
    if rows.shape[0] == 1:
        return True
    other, v = rows[b], 0
    while v < row.shape[0] and other[v] == row[v]:  # stops at the first difference
        v += 1
    return v == row.shape[0]


@nb.njit(cache=True)
def batch(
    p: NDArray, q: NDArray, drafts: NDArray, top_k: int, atol: float, uniforms: FloatArray
) -> tuple[IntArray, FloatArray]:
    """The output token of each row of ``drafts`` ((B, n) ids) for p and q of shape (1, V) or
    (B, V) (any float dtype; top_k <= 0: every positive draft token) with n + 2 ``uniforms``
    per row (n clocks, two for the residual draw). Returns (tokens, table): the table's rows
    are (status, draw) with the status codes of
    :mod:`otlp.solvers.global_resolution.constants` (OK, BAD_P, SUM_Q, BAD_DRAFT ...); a bad row's
    token is -1. Consecutive rows with the same (p, q) (one shared (1, V) pair, or equal
    rows of a (B, V) batch, as a tiled batch has) build one partition for the union of their
    drafts: a row's token does not depend on how far gap filling went past its own drafts."""
    rows = drafts.shape[0]
    out = np.full(rows, -1, dtype=np.int64)
    table = np.zeros((rows, 2))
    begin = 0
    while begin < rows:
        pb = p[0] if p.shape[0] == 1 else p[begin]
        qb = q[0] if q.shape[0] == 1 else q[begin]
        end = begin + 1
        while end < rows and _same(p, pb, end) and _same(q, qb, end):
            end += 1
        _rows(
            pb, qb, drafts[begin:end], top_k, atol, uniforms[begin:end], out[begin:], table[begin:]
        )
        for b in range(begin, end):
            if table[b, 0] != OK:
                return out, table
        begin = end
    return out, table
