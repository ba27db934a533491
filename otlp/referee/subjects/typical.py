"""Typical acceptance (Cai et al. 2024, "Medusa: simple LLM inference acceleration framework
with multiple decoding heads", typical acceptance scheme), shipped by Medusa and by vLLM's
TypicalAcceptanceSampler: lossy by design, trading exactness for acceptance.

A drafted token x is accepted where the target gives it more than min(epsilon, delta exp(-H(p)))
(H the entropy of the target law at that context); at the first refused token the target's
most likely token is emitted instead (greedy recovery); a fully accepted chain ends with a
bonus token sampled from the target. Defaults: vLLM's posterior_threshold epsilon = 0.09 and
posterior_alpha delta = 0.3.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from otlp.referee.subjects.common import (
    FloatArray,
    IntArray,
    draw,
    position_args,
    walk_tree,
)

EPSILON = 0.09  # posterior_threshold
DELTA = 0.3  # posterior_alpha


def typical_step(
    target: FloatArray, laws: FloatArray, drafts: IntArray, rng: np.random.Generator
) -> int:
    """Typical acceptance of the first draft on checked arguments: the draft if
    p(x) > min(EPSILON, DELTA exp(-H(p))), else argmax p (lowest id on ties); no drafts: a
    sample of p."""
    if drafts.shape[0] == 0:
        return draw(target, rng)
    positive = target[target > 0.0]
    entropy = float(-(positive * np.log(positive)).sum())
    x = int(drafts[0])
    if target[x] > min(EPSILON, DELTA * np.exp(-entropy)):
        return x
    return int(np.argmax(target))


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
