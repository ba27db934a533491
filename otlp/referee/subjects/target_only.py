"""Target-only verification, as EAGLE and SGLang verify draft trees: sample the target at the
node and accept if the sample is a child's token.

EAGLE (Li et al. 2024, "EAGLE: speculative sampling requires rethinking feature uncertainty";
EAGLE-2 keeps the verification) and SGLang's tree verification with sampling walk the
tree this way. Every emitted token is a draw from the target, so it is lossless whatever the
drafts, but it ignores q and accepts at most P(y in drafts) for y ~ p, below the optimum.

SGLang's kernel (tree_speculative_sampling_target_only) runs it with one coin per level: the
siblings' target masses are summed in order and the first sibling whose running sum reaches the
coin is accepted; when none does, the correction token is drawn from p with the tried siblings
removed (:func:`cumulative_coin`). That is the same law when siblings hold distinct tokens, but
a token held by two siblings has its mass counted twice.

EAGLE's reference code runs it as recursive rejection with the draft taken as certain (q = 1
at the drafted token): sibling x is accepted with probability p_j(x), a rejection removes x
from p_j and renormalises, a repeated token is skipped (:func:`renormalised_target`). That is
again y ~ p, whatever the drafts.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from otlp.referee.subjects.common import draw, position_args, walk_tree
from otlp.solvers.arrays import FloatArray, IntArray


def target_only(p: ArrayLike, q: ArrayLike, drafts: ArrayLike, rng: np.random.Generator) -> int:
    """One position of target-only verification: y ~ p, whatever the drafts.

    Protocol: position. Draft scheme: any (the drafts are only compared with y; registered
    with i.i.d. drafts). Expected lossless.
    """
    return target_draw(*position_args(p, q, drafts), rng)


def target_draw(
    target: FloatArray, laws: FloatArray, drafts: IntArray, rng: np.random.Generator
) -> int:
    """:func:`target_only` on checked arguments: a draw from ``target``."""
    return draw(target, rng)


def cumulative_coin(
    target: FloatArray,
    laws: FloatArray,
    drafts: IntArray,
    rng: np.random.Generator,
    threshold_single: float = 1.0,
    threshold_acc: float = 1.0,
) -> int:
    """SGLang's target-only step on checked arguments: one coin u; sibling j is accepted when
    u <= (p(x_1) + ... + p(x_j)) / threshold_acc or p(x_j) >= threshold_single; otherwise
    the correction token ~ p without the tried siblings' tokens. The thresholds (SGLang's
    speculative_accept_threshold_single / _acc, default 1) trade exactness for acceptance
    below 1."""
    coin = rng.random()
    mass = 0.0
    left = target.copy()
    for x in drafts:
        mass += target[x]
        if coin <= mass / threshold_acc or target[x] >= threshold_single:
            return int(x)
        left[x] = 0.0
    return draw(left if left.sum() > 0.0 else target, rng)


def sglang_target_only(
    p: ArrayLike, q: ArrayLike, drafts: ArrayLike, rng: np.random.Generator
) -> int:
    """One position of SGLang's target-only verification with thresholds 1
    (:func:`cumulative_coin`): y ~ p when the drafts are distinct tokens; a repeated draft
    token is accepted with twice its target mass (p = (0.5, 0.5), drafts (0, 0): y = 0
    always).

    Protocol: position. Draft scheme: without replacement (distinct tokens, as EAGLE's top-k
    siblings). Expected lossless.
    """
    return cumulative_coin(*position_args(p, q, drafts), rng)


def sglang_target_only_tree(
    tokens: ArrayLike, parents: ArrayLike, p: ArrayLike, q: ArrayLike, rng: np.random.Generator
) -> tuple[list[int], int]:
    """SGLang's tree_speculative_sampling_target_only with thresholds 1: at each node
    :func:`cumulative_coin` on its children, walking to the child it accepts; after the last
    accepted node, the correction or bonus token from p without the tried children.

    Protocol: tree. Draft scheme: each node's children without replacement (distinct tokens,
    as EAGLE's top-k). Expected lossless (lossy when siblings repeat a token:
    :func:`sglang_target_only_tree_iid`).
    """
    return walk_tree(tokens, parents, p, q, rng, cumulative_coin)


def sglang_target_only_tree_iid(
    tokens: ArrayLike, parents: ArrayLike, p: ArrayLike, q: ArrayLike, rng: np.random.Generator
) -> tuple[list[int], int]:
    """:func:`sglang_target_only_tree` fed i.i.d. children, which may repeat a token: the
    running sum counts a repeated token's target mass twice.

    Protocol: tree. Draft scheme: each node's children i.i.d. from q at its context. Expected
    lossy.
    """
    return sglang_target_only_tree(tokens, parents, p, q, rng)


# Acceptance thresholds below SGLang's default of 1 (its speculative_accept_threshold_single
# and speculative_accept_threshold_acc): illustrative settings of the kind a deployment
# lowers to accept more, judged as subjects (issue 35).
RELAXED_SINGLE = 0.9
RELAXED_ACC = 0.7


def relaxed_coin(
    target: FloatArray, laws: FloatArray, drafts: IntArray, rng: np.random.Generator
) -> int:
    """:func:`cumulative_coin` with thresholds :data:`RELAXED_SINGLE` and :data:`RELAXED_ACC`."""
    return cumulative_coin(target, laws, drafts, rng, RELAXED_SINGLE, RELAXED_ACC)


def sglang_target_only_relaxed(
    p: ArrayLike, q: ArrayLike, drafts: ArrayLike, rng: np.random.Generator
) -> int:
    """One position of SGLang's target-only verification with its thresholds below 1
    (:func:`relaxed_coin`: threshold_single 0.9, threshold_acc 0.7). Sibling j is accepted
    when u <= (p(x_1) + ... + p(x_j)) / 0.7, so the first sibling alone is accepted with
    probability min(1, p(x_1) / 0.7), more than p(x_1): p = (0.5, 0.5), q = (0.9, 0.1), two
    drafts without replacement give P(y = 0) = 0.9 * 5/7 + 0.1 * 2/7 = 0.671 (TV 0.171).

    Protocol: position. Draft scheme: without replacement (distinct tokens, as EAGLE's
    top-k siblings). Expected lossy.
    """
    return relaxed_coin(*position_args(p, q, drafts), rng)


def sglang_target_only_relaxed_tree(
    tokens: ArrayLike, parents: ArrayLike, p: ArrayLike, q: ArrayLike, rng: np.random.Generator
) -> tuple[list[int], int]:
    """SGLang's tree_speculative_sampling_target_only with thresholds below 1
    (:func:`relaxed_coin` at each node).

    Protocol: tree. Draft scheme: each node's children without replacement. Expected lossy.
    """
    return walk_tree(tokens, parents, p, q, rng, relaxed_coin)


def renormalised_target(
    target: FloatArray, laws: FloatArray, drafts: IntArray, rng: np.random.Generator
) -> int:
    """EAGLE's reference step on checked arguments: the distinct drafts in order, x accepted
    with probability p_j(x); after a rejection p_{j+1} = p_j without x, renormalised; when all
    are rejected y ~ p_last."""
    law = target
    tried: set[int] = set()
    for x in drafts:
        if int(x) in tried:
            continue
        tried.add(int(x))
        if rng.random() < law[x]:
            return int(x)
        law = law.copy()
        law[x] = 0.0
        law /= law.sum()  # > 0: a rejection needs law[x] < 1
    return draw(law, rng)


def eagle_target_only(
    p: ArrayLike, q: ArrayLike, drafts: ArrayLike, rng: np.random.Generator
) -> int:
    """One position of EAGLE's reference verification with sampling
    (:func:`renormalised_target`): y ~ p whatever the drafts.

    Protocol: position. Draft scheme: any (repeated drafts are skipped; registered with
    i.i.d. drafts). Expected lossless.
    """
    return renormalised_target(*position_args(p, q, drafts), rng)


def eagle_target_only_tree(
    tokens: ArrayLike, parents: ArrayLike, p: ArrayLike, q: ArrayLike, rng: np.random.Generator
) -> tuple[list[int], int]:
    """EAGLE's reference tree verification with sampling: at each node
    :func:`renormalised_target` on its children, walking to the child it accepts.

    Protocol: tree. Draft scheme: any (registered with i.i.d. children). Expected lossless.
    """
    return walk_tree(tokens, parents, p, q, rng, renormalised_target)


def target_only_tree(
    tokens: ArrayLike, parents: ArrayLike, p: ArrayLike, q: ArrayLike, rng: np.random.Generator
) -> tuple[list[int], int]:
    """EAGLE / SGLang tree verification with sampling: at each node y ~ p at its context; if y
    is a child's token move to that child (the first one), else stop with y as the bonus token.

    Protocol: tree. Draft scheme: any (registered with i.i.d. children). Expected lossless.
    """
    return walk_tree(tokens, parents, p, q, rng, target_draw)
