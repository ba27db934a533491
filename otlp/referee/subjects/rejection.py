"""Recursive rejection as engines ship it: SpecInfer / llama.cpp (drafts with replacement),
Sequoia (drafts without replacement) and single-draft chains (vLLM, FlashInfer, Hugging Face
transformers' assisted generation).

Written here from the published algorithms: speculative sampling (Leviathan et al. 2023,
"Fast inference from transformers via speculative decoding", Algorithm 1; Chen et al. 2023),
SpecInfer's multi-step speculative sampling (Miao et al. 2024), Sequoia's sampling without
replacement (Chen et al. 2024, "Sequoia"); [SpecHub] §3.3
states both recursive rules.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from otlp.referee.subjects.common import accepts, draw, position_args, residual, walk_tree
from otlp.solvers.arrays import FloatArray, IntArray


def specinfer(p: ArrayLike, q: ArrayLike, drafts: ArrayLike, rng: np.random.Generator) -> int:
    """SpecInfer's multi-step speculative sampling (Miao et al. 2024), the rule of
    llama.cpp's speculative example: try the drafts in order, accept x_j with probability
    min(1, p_j(x_j) / q_j(x_j)); after a rejection p_{j+1} = norm(max(p_j - q_j, 0)); when all
    are rejected draw from the last residual.

    Protocol: position. Draft scheme: i.i.d. from ``q`` (V,), or independent drafters with
    ``q`` (n, V) one law per draft. Expected lossless.
    """
    return recursive_rejection(*position_args(p, q, drafts), rng)


def recursive_rejection(
    target: FloatArray, laws: FloatArray, drafts: IntArray, rng: np.random.Generator
) -> int:
    """:func:`specinfer` on checked arguments (``laws`` (n, V), one per draft)."""
    for j, x in enumerate(drafts):
        if accepts(rng, target[x], laws[j, x]):
            return int(x)
        target = residual(target, laws[j])
    return draw(target, rng)


def sequoia(p: ArrayLike, q: ArrayLike, drafts: ArrayLike, rng: np.random.Generator) -> int:
    """Sequoia's recursive rejection without replacement (Chen et al. 2024): drafts are
    distinct tokens drawn one after another from q with the drawn ones removed; try them in
    order, accept x_j with probability min(1, p_j(x_j) / q_j(x_j)); after a rejection
    p_{j+1} = norm(max(p_j - q_j, 0)) and q_{j+1} = q_j with x_j removed, renormalised.

    Protocol: position. Draft scheme: without replacement from ``q`` (V,). Expected lossless.
    """
    return recursive_rejection_without_replacement(*position_args(p, q, drafts, one_law=True), rng)


def recursive_rejection_without_replacement(
    target: FloatArray, laws: FloatArray, drafts: IntArray, rng: np.random.Generator
) -> int:
    """:func:`sequoia` on checked arguments (``laws`` (n, V), the same law in every row)."""
    if np.unique(drafts).shape[0] < drafts.shape[0]:
        raise ValueError(f"drafts: drawn without replacement, yet repeated: {drafts.tolist()}")
    law = laws[0] if drafts.shape[0] else target
    for x in drafts:
        if accepts(rng, target[x], law[x]):
            return int(x)
        target = residual(target, law)
        law = law.copy()
        law[x] = 0.0
        total = law.sum()  # the rest summed, not 1 - q(x): that cancels when q(x) is near 1
        if total > 0.0:
            law /= total
    return draw(target, rng)


def single_draft(p: ArrayLike, q: ArrayLike, drafts: ArrayLike, rng: np.random.Generator) -> int:
    """Speculative sampling of one draft (Leviathan et al. 2023, Algorithm 1), as in vLLM's
    rejection sampler, FlashInfer's chain_speculative_sampling and transformers' assisted
    generation at one position: accept x with probability min(1, p(x) / q(x)), else draw from
    norm(max(p - q, 0)).

    Protocol: position; with n > 1 drafts it verifies the first (as otlp's ``sps``). Draft
    scheme: the first draft drawn from ``q`` (i.i.d. or without replacement). Expected
    lossless.
    """
    target, laws, tokens = position_args(p, q, drafts)
    if tokens.shape[0] == 0:
        raise ValueError("drafts: one draft expected, got none")
    return recursive_rejection(target, laws[:1], tokens[:1], rng)


def specinfer_tree(
    tokens: ArrayLike, parents: ArrayLike, p: ArrayLike, q: ArrayLike, rng: np.random.Generator
) -> tuple[list[int], int]:
    """SpecInfer's token-tree verification (Miao et al. 2024): at each node
    :func:`specinfer` on its children's tokens; a token that is a child's moves the walk there
    (the first such child when siblings repeat a token), else it is the correction token.

    Protocol: tree. Draft scheme: each node's children i.i.d. from q at its context. Expected
    lossless.
    """
    return walk_tree(tokens, parents, p, q, rng, recursive_rejection)


def sequoia_tree(
    tokens: ArrayLike, parents: ArrayLike, p: ArrayLike, q: ArrayLike, rng: np.random.Generator
) -> tuple[list[int], int]:
    """Sequoia's tree verification (Chen et al. 2024): at each node
    :func:`sequoia` on its children's tokens, walking to the child whose token it returns.

    Protocol: tree. Draft scheme: each node's children without replacement from q at its
    context. Expected lossless.
    """
    return walk_tree(tokens, parents, p, q, rng, recursive_rejection_without_replacement)


def single_chain_tree(
    tokens: ArrayLike, parents: ArrayLike, p: ArrayLike, q: ArrayLike, rng: np.random.Generator
) -> tuple[list[int], int]:
    """Chain verification of vLLM's rejection sampler, FlashInfer's
    chain_speculative_sampling and transformers' assisted generation (Leviathan et al. 2023,
    Algorithm 1): along the chain accept x_i with probability min(1, p_i(x_i) / q_i(x_i)); at
    the first rejection emit a draw from norm(max(p_i - q_i, 0)); if all are accepted, a bonus
    token from p at the end.

    Protocol: tree, read as a chain (parents = [-1, 0, 1, ...]; on a wider tree, the chain of
    first children). Draft scheme: each token from q at its context. Expected lossless.
    """
    return walk_tree(tokens, parents, p, q, rng, recursive_rejection, first_child_only=True)
