"""Typical acceptance (Cai et al. 2024, "Medusa: simple LLM inference acceleration framework
with multiple decoding heads", typical acceptance scheme), shipped by Medusa and by vLLM's
TypicalAcceptanceSampler: lossy by design, trading exactness for acceptance.

A drafted token x is accepted where the target gives it more than min(epsilon, delta exp(-H(p)))
(H the entropy of the target law at that context, computed as both engines compute it:
-sum p log(p + 1e-5)). On a chain (vLLM's sampler) the target's most likely token is emitted at
the first refused token (greedy recovery) and a fully accepted chain ends with a bonus token
sampled from the target. On a tree (Medusa's ``evaluate_posterior`` with its default
``fast=True``) every root-to-leaf candidate path keeps its longest accepted prefix, the longest
prefix wins (ties: the largest target log-likelihood, then the first path), and the next token
is the target's most likely one at its end (Medusa decodes the first token of every step
greedily, Cai et al. 2024 §2.3.1). Defaults: posterior_threshold epsilon = 0.09 and
posterior_alpha delta = 0.3 (Medusa's ``generate`` and vLLM's).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from otlp.referee.subjects.common import draw, position_args, tree_args, walk_tree
from otlp.solvers.arrays import FloatArray, IntArray
from otlp.verification import shapes

EPSILON = 0.09  # posterior_threshold
DELTA = 0.3  # posterior_alpha
LOG_OFFSET = 1e-5  # the engines' entropy: -sum p log(p + 1e-5)


def typical(target: FloatArray, token: int) -> bool:
    """Whether ``token`` passes typical acceptance at a context of target law ``target``:
    p(token) > min(EPSILON, DELTA exp(-H)), H = -sum p log(p + LOG_OFFSET)."""
    entropy = float(-(target * np.log(target + LOG_OFFSET)).sum())
    return bool(target[token] > min(EPSILON, DELTA * np.exp(-entropy)))


def typical_step(
    target: FloatArray, laws: FloatArray, drafts: IntArray, rng: np.random.Generator
) -> int:
    """Typical acceptance of the first draft on checked arguments: the draft if it passes
    :func:`typical`, else argmax p (lowest id on ties); no drafts: a sample of p."""
    if drafts.shape[0] == 0:
        return draw(target, rng)
    x = int(drafts[0])
    return x if typical(target, x) else int(np.argmax(target))


def typical_acceptance(
    p: ArrayLike, q: ArrayLike, drafts: ArrayLike, rng: np.random.Generator
) -> int:
    """One position of typical acceptance (:func:`typical_step`). Right only where p is
    one-hot. p = (0.5, 0.5), q = (0.9, 0.1): both drafts pass the threshold 0.09, so y ~ q
    (TV 0.4); p = (0.6, 0.35, 0.05), q = (0, 0, 1): the draft fails it and y = 0 always
    (TV 0.4).

    Protocol: position; with n > 1 drafts it reads the first. Draft scheme: the first draft
    drawn from ``q``. Expected lossy.
    """
    return typical_step(*position_args(p, q, drafts), rng)


def typical_acceptance_chain_tree(
    tokens: ArrayLike, parents: ArrayLike, p: ArrayLike, q: ArrayLike, rng: np.random.Generator
) -> tuple[list[int], int]:
    """vLLM's TypicalAcceptanceSampler / Medusa's typical acceptance on a chain: accept the
    drafted tokens while each passes :func:`typical_step`, emit argmax p at the first refused
    one, or a bonus token sampled from p after the last.

    Protocol: tree, read as a chain (on a wider tree, the chain of first children). Draft
    scheme: each token from q at its context. Expected lossy.
    """
    return walk_tree(tokens, parents, p, q, rng, typical_step, first_child_only=True)


def medusa_typical_tree(
    tokens: ArrayLike, parents: ArrayLike, p: ArrayLike, q: ArrayLike, rng: np.random.Generator
) -> tuple[list[int], int]:
    """Medusa's typical acceptance on its candidate tree (``evaluate_posterior``, typical
    sampling, ``fast=True``): a node passes when its token passes :func:`typical` at its
    parent's context and every ancestor passes (each root-to-leaf path keeps its longest
    accepted prefix); the deepest passing node wins, ties broken by the largest sum of
    log p along its path, then the lowest node index (Medusa's first path); the emitted
    tokens are its path and argmax p at its context (argmax p at the root when no node
    passes). Deterministic: ``rng`` is not drawn from, and q is not read.

    Right only where p is one-hot at every context it reaches. A root with children 0 and 1,
    p = (0.6, 0.4) at the root and p = (0.5, 0.5) after either token: both children pass,
    0 wins on likelihood, and the emitted stream is (0, 0) always (TV 0.7 from the target's
    stream law (0.3, 0.3, 0.2, 0.2)).

    Protocol: tree. Draft scheme: each node's children without replacement (Medusa's heads
    propose distinct top-k tokens). Expected lossy.
    """
    row, shape, target, _ = tree_args(tokens, parents, p, q)
    nodes = row.shape[0]
    passes = np.zeros(nodes, dtype=bool)
    loglik = np.zeros(nodes)
    for i in range(nodes):
        parent = int(shape[i])
        if row[i] < 0 or (parent >= 0 and not passes[parent]):
            continue
        law = target[parent + 1]
        passes[i] = typical(law, int(row[i]))
        if passes[i]:  # p > 0 at a passing token
            loglik[i] = np.log(law[row[i]]) + (loglik[parent] if parent >= 0 else 0.0)
    if not passes.any():
        return [], int(np.argmax(target[0]))
    levels = shapes.depth(shape)  # a passing node's ancestors all pass
    deepest = np.flatnonzero(passes & (levels == levels[passes].max()))
    best = int(deepest[np.argmax(loglik[deepest])])
    return shapes.ancestors(shape, best).tolist(), int(np.argmax(target[best + 1]))
