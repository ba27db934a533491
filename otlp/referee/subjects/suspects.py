"""Two suspect variants of multi-draft rejection seen in engines' code, modelled from their
descriptions (issue 26): both are expected lossy, and each docstring says when it is right.

* Per-sibling ratio without residual update: one stored version of TensorRT-LLM's tree
  rejection sampling kernel tried each sibling with min(1, p / q) against the same target law
  (the later fix changed the output distribution of its tree rejection sampling).
  TensorRT-LLM's dynamic-tree rejection kernel (``verifyDynamicTreeRejectionKernel`` in
  ``cpp/tensorrt_llm/kernels/speculativeDecoding/dynamicTreeKernels.cu``, as stored) is this
  rule on its EAGLE-3 dynamic trees: each sibling x tried with min(1, p(x) / q(x)) against
  the parent's target row, one residual norm(max(p - q, 0)) when all are rejected.
* Residual from two id-sorted top-N lists: llama.cpp's speculative example keeps the target's
  and the draft's candidate lists (token id, probability), sorts each by token id and subtracts
  them entry by entry, which lines up only when both lists hold the same ids.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from otlp.referee.subjects.common import accepts, draw, position_args, residual, walk_tree
from otlp.solvers.arrays import FloatArray, IntArray

TOP_N = 8  # candidates kept per list by the top-N residual (the vocabulary when smaller)


def sibling_ratio_no_residual(
    p: ArrayLike, q: ArrayLike, drafts: ArrayLike, rng: np.random.Generator
) -> int:
    """Suspect A: try each draft x_j with min(1, p(x_j) / q(x_j)) against the same p (no
    residual update between siblings); when all are rejected draw from norm(max(p - q, 0)).

    Right for one draft (it is speculative sampling then); with two or more it over-accepts
    tokens that q over-drafts: p = (0.5, 0.5), q = (0.9, 0.1), n = 2 gives P(y = 0) = 0.7
    (TV 0.2 from p) and acceptance 0.84 against alpha* = 0.69.

    Protocol: position. Draft scheme: i.i.d. from ``q`` (V,). Expected lossy.
    """
    return ratio_without_residual(*position_args(p, q, drafts, one_law=True), rng)


def ratio_without_residual(
    target: FloatArray, laws: FloatArray, drafts: IntArray, rng: np.random.Generator
) -> int:
    """:func:`sibling_ratio_no_residual` on checked arguments (``laws`` (n, V), equal rows)."""
    for x in drafts:
        if accepts(rng, target[x], laws[0, x]):
            return int(x)
    return draw(residual(target, laws[0]) if drafts.shape[0] else target, rng)


def top_list(law: FloatArray, top_n: int) -> tuple[IntArray, FloatArray]:
    """An engine's candidate list: the at most ``top_n`` most likely tokens of positive
    probability (ties to lower ids), as (ids, probabilities) sorted by token id. A partition,
    not a sort of the vocabulary."""
    ids = np.flatnonzero(law > 0.0)
    if ids.shape[0] > top_n:
        values = law[ids]
        kth = np.partition(values, values.shape[0] - top_n)[values.shape[0] - top_n]
        above = ids[values > kth]
        tied = ids[values == kth][: top_n - above.shape[0]]  # ids ascend: lower ids first
        ids = np.sort(np.concatenate([above, tied]))
    return ids, law[ids]


def top_n_id_sorted_residual(
    p: ArrayLike,
    q: ArrayLike,
    drafts: ArrayLike,
    rng: np.random.Generator,
    top_n: int = TOP_N,
) -> int:
    """Suspect B: SpecInfer-style recursive rejection whose residual is computed from candidate
    lists (:func:`top_list`: each law's at most ``top_n`` tokens of positive probability,
    sorted by token id): the target list's i-th probability minus the draft list's i-th,
    clipped at 0 (entries past the draft list's end kept), renormalised, with the target
    list's ids. Acceptance reads p and q at the draft in the lists (0 when absent).

    Right when both lists hold the same ids and p's list holds all of p's support (then it is
    :func:`~otlp.referee.subjects.rejection.specinfer`): e.g. full-support p and q with
    V <= ``top_n``. Wrong when the lists differ: p = (0.5, 0.3, 0.2), q = (0, 0.5, 0.5), n = 1
    gives the law (0, 0.3, 0.7) (TV 0.5 from p): the draft list [1, 2] is subtracted from the
    target's entries [0, 1], and the correction lands on token 2 instead of token 0.

    Protocol: position. Draft scheme: i.i.d. from ``q`` (V,), or independent drafters with
    ``q`` (n, V) (each drafter's own list). Expected lossy.
    """
    return id_sorted_residual(*position_args(p, q, drafts), rng, top_n)


def id_sorted_residual(
    target: FloatArray,
    laws: FloatArray,
    drafts: IntArray,
    rng: np.random.Generator,
    top_n: int = TOP_N,
) -> int:
    """:func:`top_n_id_sorted_residual` on checked arguments (``laws`` (n, V))."""
    ids, probs = top_list(target, top_n)
    for j, x in enumerate(drafts):
        draft_ids, draft_probs = top_list(laws[j], top_n)
        p_x = probs[ids == x].sum()
        q_x = draft_probs[draft_ids == x].sum()
        if accepts(rng, p_x, q_x):
            return int(x)
        shared = min(probs.shape[0], draft_probs.shape[0])
        left = probs.copy()
        left[:shared] = np.maximum(probs[:shared] - draft_probs[:shared], 0.0)
        if left.sum() > 0.0:
            probs = left / left.sum()
    return int(ids[draw(probs, rng)])


def sibling_ratio_no_residual_tree(
    tokens: ArrayLike, parents: ArrayLike, p: ArrayLike, q: ArrayLike, rng: np.random.Generator
) -> tuple[list[int], int]:
    """Suspect A on a draft tree: :func:`sibling_ratio_no_residual` at each node, walking to the
    child whose token it returns (the tree kernel's shape).

    Protocol: tree. Draft scheme: each node's children i.i.d. from q at its context. Expected
    lossy (wherever a node has two or more children).
    """
    return walk_tree(tokens, parents, p, q, rng, ratio_without_residual)


def top_n_id_sorted_residual_tree(
    tokens: ArrayLike, parents: ArrayLike, p: ArrayLike, q: ArrayLike, rng: np.random.Generator
) -> tuple[list[int], int]:
    """Suspect B on a draft tree: :func:`top_n_id_sorted_residual` at each node, walking to the
    child whose token it returns (llama.cpp's speculative example drafts several sequences
    that share prefixes).

    Protocol: tree. Draft scheme: each node's children i.i.d. from q at its context. Expected
    lossy (wherever the two lists at a node hold different ids).
    """
    return walk_tree(tokens, parents, p, q, rng, id_sorted_residual)


def trtllm_dynamic_tree(
    tokens: ArrayLike, parents: ArrayLike, p: ArrayLike, q: ArrayLike, rng: np.random.Generator
) -> tuple[list[int], int]:
    """TensorRT-LLM's dynamic-tree rejection kernel as stored (``verifyDynamicTreeRejection``):
    depth by depth from the last accepted node, its children in sibling order, each accepted
    with min(1, p(x) / q(x)), p the last accepted node's target row for every sibling (no
    residual update between siblings); the first accepted sibling extends the path; when all
    are rejected, the correction token is a draw from norm(max(p - q, 0)) (p itself when that
    is empty), and at a leaf the bonus token is a draw from p. In law this is
    :func:`sibling_ratio_no_residual_tree` on the kernel's distinct siblings (EAGLE-3's
    top-k).

    The kernel's own unit test (test_dynamic_tree_kernel_rejection_sampling_has_higher_acceptance)
    drafts a root with children 1, 2, 3 from q = (0, 0.35, 0.35, 0.30, 0) under the target
    p = (0, 0.30, 0.15, 0.05, 0.50): token 1 is accepted with 6/7, so given that tree the first
    token follows (0, 6/7, 3/49, 2/147, 10/147), TV 6/7 - 0.3 = 0.557 from p (Sequoia's
    lossless rule is at the same TV given that tree, with (0, 6/7, 0, 0, 1/7)). Over the
    drafting (every order of 1, 2, 3) the kernel's law misses p by 0.5 - 10/147 = 0.432,
    where Sequoia's is p.

    Protocol: tree. Draft scheme: each node's children without replacement from q at its
    context. Expected lossy (wherever a node has two or more children).
    """
    return sibling_ratio_no_residual_tree(tokens, parents, p, q, rng)
