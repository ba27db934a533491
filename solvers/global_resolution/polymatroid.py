"""Outer residual targets by the greedy polymatroid algorithm ([GR] Theorem 6.2, App. H).

For i.i.d. drafts psi(H) = p(H) - q(H)^n. Order the tokens outside H* by increasing q/p,
v_1, ..., v_K, and let H_i = H* ∪ {v_i, ..., v_K}. Lemma 6.3 reduces every
``min_{T ⊇ H_i} psi(T)`` to ``m_i = min_{j <= i} psi(H_j)``, a cumulative minimum, so the
targets ``p_{v_i} = p(v_i) + m_{i+1} - m_i`` cost O(K) after the O(k log k) sort.

The same pass yields an exact combinatorial decomposition of the outer system. The prefix
S_i = {v_1, ..., v_i} is *tight* (every draft set meeting S_i must give all its mass to S_i)
exactly when ``psi(H_{i+1}) = m_{i+1}`` is a new record of the cumulative minimum: then
``p(S_i) + m_{i+1} - m_1 = 1 - q(H_{i+1})^n = P(omega meets S_i)``. The records cut the
order into blocks; in every exact solution a draft set gives its mass only to its tokens in
the *earliest* block it meets, so the blocks are independent problems, and a block of one
token needs no solving at all (it receives every set whose earliest block it is).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np
from numpy.typing import NDArray

from otlp.solvers.arrays import FloatArray, IntArray


@nb.njit(cache=True)
def _greedy_targets(
    p_order: FloatArray, q_order: FloatArray, p_inside: float, q_inside: float, n: int
) -> tuple[FloatArray, NDArray[np.bool_], FloatArray]:
    """Targets, block ends and the base mass after each token, in increasing-q/p order."""
    count = p_order.shape[0]
    p_suffix = np.zeros(count + 1)
    q_suffix = np.zeros(count + 1)
    for i in range(count - 1, -1, -1):
        p_suffix[i] = p_suffix[i + 1] + p_order[i]
        q_suffix[i] = q_suffix[i + 1] + q_order[i]
    # psi[i] = psi(H_{i+1}) in 0-based form: H* plus tokens i..count-1.
    psi = np.empty(count + 1)
    for i in range(count + 1):
        psi[i] = (p_inside + p_suffix[i]) - (q_inside + q_suffix[i]) ** n
    cummin = np.empty(count + 1)
    cummin[0] = psi[0]
    for i in range(1, count + 1):
        cummin[i] = min(cummin[i - 1], psi[i])
    targets = np.empty(count)
    block_end = np.empty(count, dtype=np.bool_)
    base_after = np.empty(count)
    for i in range(count):
        targets[i] = max(p_order[i] + cummin[i + 1] - cummin[i], 0.0)
        block_end[i] = psi[i + 1] <= cummin[i + 1]
        base_after[i] = q_inside + q_suffix[i + 1]
    return targets, block_end, base_after


@dataclass(frozen=True)
class OuterTargets:
    """Outer targets and the tight-set blocks of the outer system.

    ``order`` lists the tokens outside H* by increasing q/p (local ids); ``targets[j]`` is
    the target of ``order[j]``; block b is ``order[starts[b]:ends[b]]`` and ``bases[b]`` is
    the draft mass of H* and of all later blocks (the draws that leave block b's sets
    unchanged). ``block_of[token]`` is the token's block, ``-1`` for tokens in H*.
    """

    order: IntArray
    targets: FloatArray
    starts: IntArray
    ends: IntArray
    bases: FloatArray
    block_of: IntArray

    @property
    def num_blocks(self) -> int:
        return int(self.starts.shape[0])

    def block_tokens(self, block: int) -> IntArray:
        return self.order[self.starts[block] : self.ends[block]]

    def block_targets(self, block: int) -> FloatArray:
        return self.targets[self.starts[block] : self.ends[block]]

    def merged(self) -> OuterTargets:
        """The same targets as one block (the seed's single outer problem, no decomposition)."""
        if self.num_blocks <= 1:
            return self
        block_of = np.where(self.block_of >= 0, 0, -1)
        count = np.array([self.order.shape[0]], dtype=np.int64)
        return OuterTargets(
            self.order, self.targets, np.zeros(1, np.int64), count, self.bases[-1:], block_of
        )


@nb.njit(cache=True)
def target_blocks(
    p: FloatArray, q: FloatArray, outside: IntArray, p_inside: float, q_inside: float, n: int
) -> tuple[FloatArray, IntArray, IntArray, FloatArray, IntArray]:
    """Targets of the ``outside`` tokens (increasing q/p) and the tight-set blocks:
    (targets, starts, ends, bases, block_of) as in :class:`OuterTargets`."""
    count = outside.shape[0]
    targets, block_end, base_after = _greedy_targets(p[outside], q[outside], p_inside, q_inside, n)
    if count:
        block_end[count - 1] = True  # A itself is always tight (Theorem 6.1)
    blocks = 0
    for i in range(count):
        blocks += block_end[i]
    starts = np.empty(blocks, dtype=np.int64)
    ends = np.empty(blocks, dtype=np.int64)
    bases = np.empty(blocks)
    block_of = np.full(p.shape[0], -1, dtype=np.int64)
    b, begin = 0, 0
    for i in range(count):
        block_of[outside[i]] = b
        if block_end[i]:
            starts[b], ends[b], bases[b] = begin, i + 1, base_after[i]
            b, begin = b + 1, i + 1
    return targets, starts, ends, bases, block_of


def outer_targets(
    p: FloatArray, q: FloatArray, inside: NDArray[np.bool_], ratio_order: IntArray, n: int
) -> OuterTargets:
    """Theorem 6.2 targets for the tokens outside ``inside`` (= H*) and their blocks.

    ``ratio_order`` sorts all tokens by decreasing q/p with H* as its prefix (as subset
    selection returns it); ``q`` sums to one over the draft vocabulary.
    """
    outside = ratio_order[~inside[ratio_order]][::-1].astype(np.int64)
    targets, starts, ends, bases, block_of = target_blocks(
        p, q, outside, float(p[inside].sum()), float(q[inside].sum()), n
    )
    return OuterTargets(outside, targets, starts, ends, bases, block_of)
