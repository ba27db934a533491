"""Block verification of one draft chain ([GBV] §2.1; Sun et al. 2025, "Block verification
accelerates speculative decoding", ICLR 2025), the rule being merged into vLLM and proposed
for SGLang.

With the draft block X_1..X_g, target laws M_b and draft laws M_s at the contexts X_<i:
p_0 = 1, p_i = min(p_{i-1} M_b(X_i | X_<i) / M_s(X_i | X_<i), 1);
r_i = sum_x max(p_i M_b(x | X_<=i) - M_s(x | X_<=i), 0), h_i = r_i / (r_i + 1 - p_i) for i < g
(h_i = 1 when the denominator is 0), h_g = p_g. With eta_i ~ U(0, 1) independent, the block
keeps X_1..X_tau for tau = max{i : eta_i <= h_i} (i = 0 always qualifies) and emits a
correction token Y ~ norm(max(p_tau M_b(. | X_<=tau) - M_s(. | X_<=tau), 0)), or, when the
whole block is kept, a bonus token Y ~ M_b(. | X_<=g).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from otlp.referee.subjects.common import draw, first_child_chain, tree_args


def block_verification_tree(
    tokens: ArrayLike, parents: ArrayLike, p: ArrayLike, q: ArrayLike, rng: np.random.Generator
) -> tuple[list[int], int]:
    """Block verification of a chain (Sun et al. 2025; [GBV] §2.1): keeps the
    longest prefix tau whose coin eta_tau <= h_tau and emits the correction or bonus token.

    Protocol: tree, read as a chain (parents = [-1, 0, 1, ...]; absent nodes end it; on a
    wider tree, the chain of first children). Draft scheme: each token from q at its context.
    Expected lossless.
    """
    row, shape, all_target, all_draft = tree_args(tokens, parents, p, q)
    nodes = first_child_chain(row, shape)
    length = len(nodes)
    chain = row[nodes]
    contexts = np.array([0, *(node + 1 for node in nodes)], dtype=np.int64)
    target, draft = all_target[contexts], all_draft[contexts]
    on_draft = draft[np.arange(length), chain]
    if np.any(on_draft <= 0.0):
        raise ValueError(f"tokens: a drafted token of zero draft probability in {chain.tolist()}")
    kept = np.ones(length + 1)  # p_i
    for i in range(1, length + 1):
        kept[i] = min(kept[i - 1] * target[i - 1, chain[i - 1]] / on_draft[i - 1], 1.0)
    tau = 0
    for i in range(length, 0, -1):  # the largest i with eta_i <= h_i; each coin drawn once
        if i == length:
            h = kept[i]
        else:
            r = float(np.maximum(kept[i] * target[i] - draft[i], 0.0).sum())
            denominator = r + 1.0 - kept[i]
            h = r / denominator if denominator > 0.0 else 1.0
        if rng.random() <= h:
            tau = i
            break
    if tau == length:
        return nodes, draw(target[length], rng)
    correction = np.maximum(kept[tau] * target[tau] - draft[tau], 0.0)
    if correction.sum() <= 0.0:  # probability 0 up to rounding
        correction = target[tau]
    return nodes[:tau], draw(correction, rng)
