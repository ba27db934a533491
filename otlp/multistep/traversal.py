"""Traversal Verification (Weng et al., "Traversal Verification for Speculative Tree Decoding",
NeurIPS 2025, arXiv 2505.12398): a draft tree verified from its leaves towards the root, with
sequence-level acceptance probabilities.

Every node carries a state: a weight ``a`` (its sequence-level acceptance probability, the
paper's p_alpha) and the law ``p`` still owed at its context (at first the target's). A child
drafted with token x below a node of state (a, p) with draft law q starts with weight
min(a p(x) / q(x), 1) (the root has a = 1). The nodes are tested in depth-first post-order
(children in index order, each subtree before the next sibling; a node once all its children
are gone): a test accepts the node with probability its weight, which ends the call (the path
to it is accepted and the bonus token is drawn from the node's owed law ``p``). When a child's
whole subtree has been rejected, its parent's state becomes

    a' = sum_x max(a p(x) - q(x), 0) / sum_x max(q(x) - a p(x), 0),
    p' = normalised max(a p - q, 0)

(the paper's residual update; the denominator is the complement r + 1 - a summed term by term
so nothing cancels), and, for children drafted without replacement, q' = q with x removed and
renormalised. The later siblings' weights are computed from the updated state. The root's
final test always accepts (a' = 1 there, as sum p = sum q).

Why it is lossless (the invariant that the tests check by enumeration): averaged over the
drafts below it, a node of state (a, p) is accepted (itself or deeper) with probability a, and
the emitted continuation after it then follows p and the target. A child x contributes
q(x) min(a p(x)/q(x), 1) = min(a p(x), q(x)); what is still owed after it fails is exactly
max(a p - q, 0), of mass r, out of a failure probability 1 - a + r. On one chain the tests
are block verification's ([GBV] §2.1; Sun et al.), h_L = p_L and h_i = r_i / (r_i + 1 - p_i),
which is the paper's optimality-on-chains statement.

The functions take the per-context laws as callables ``target(c)``, ``draft(c)`` (context c:
0 the root, i + 1 node i's), so a caller reads (and checks) only the rows it needs: a sampler
stops at the first accepted test and never computes the residuals after it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from otlp.multistep.single_path import StopLaw
from otlp.solvers.arrays import FloatArray, IntArray

Laws = Callable[[int], FloatArray]


@dataclass(frozen=True)
class Test:
    """One test of the traversal, reached when every earlier test rejected: ``node`` (-1 = the
    root) is accepted with probability ``accept``; the bonus token then follows ``owed``, or
    the target at the node's context where ``owed`` is None (no child was rejected there)."""

    node: int
    accept: float
    owed: FloatArray | None


def tests(
    kids: Sequence[IntArray],
    tokens: IntArray,
    target: Laws,
    draft: Laws,
    without_replacement: bool = False,
) -> Iterator[Test]:
    """The traversal's tests in order ([Weng et al. 2025] Algorithm 2, leaves to root).

    ``kids[c]`` are context c's present children (node ids, in drafting order), ``tokens[i]``
    node i's token; ``target(c)``, ``draft(c)`` the float64 laws at context c (summing to 1;
    the draft restricted as the drafts were drawn, each drafted token of positive draft
    probability). Residuals are computed lazily: only when the consumer asks for the next test.
    """
    yield from _visit(-1, 1.0, kids, tokens, target, draft, without_replacement)


def _visit(
    node: int,
    weight: float,
    kids: Sequence[IntArray],
    tokens: IntArray,
    target: Laws,
    draft: Laws,
    without_replacement: bool,
) -> Iterator[Test]:
    context = node + 1
    below = kids[context]
    owed: FloatArray | None = None
    if below.shape[0]:
        p, q = target(context), draft(context)
        for child in below:
            x = int(tokens[child])
            start = min(weight * p[x] / q[x], 1.0)
            yield from _visit(int(child), start, kids, tokens, target, draft, without_replacement)
            weight, p = _residual(weight, p, q)  # the child's whole subtree was rejected
            if without_replacement:
                q = q.copy()
                q[x] = 0.0
                total = q.sum()
                q = q / total if total > 0 else q
        owed = p
    yield Test(node, 1.0 if node < 0 else weight, owed)


def _residual(weight: float, p: FloatArray, q: FloatArray) -> tuple[float, FloatArray]:
    """A node's state after one child's subtree failed: (a', p') from (a, p) and the draft q."""
    excess = weight * p - q
    over = np.maximum(excess, 0.0)
    owed, spare = float(over.sum()), float(np.maximum(-excess, 0.0).sum())
    if spare <= 0.0:  # r + 1 - a = 0: the failure had probability 0 (p = q, a = 1)
        return 1.0, p
    if owed <= 0.0:  # nothing owed: the node can no longer be accepted
        return 0.0, p
    return owed / spare, over / owed


def stop_law(
    kids: Sequence[IntArray],
    tokens: IntArray,
    target: Laws,
    draft: Laws,
    without_replacement: bool = False,
) -> list[tuple[Test, float]]:
    """Every test with the probability that the traversal stops there (accepts it)."""
    out = []
    survive = 1.0
    for test in tests(kids, tokens, target, draft, without_replacement):
        out.append((test, survive * test.accept))
        survive *= 1.0 - test.accept
        if survive <= 0.0:
            break
    return out


def chain(target: FloatArray, draft: FloatArray, tokens: IntArray) -> StopLaw:
    """Traversal Verification on single draft paths as a :class:`StopLaw` (the interface of
    :func:`otlp.multistep.single_path.block`): ``target`` (P, L + 1, V), ``draft`` (P, L, V),
    ``tokens`` (P, L); ``stop[P, i]`` = P(i tokens accepted), ``correction[P, i]`` the bonus
    law then. Equal to block verification's ([Weng et al. 2025], optimality on chains)."""
    paths, steps = tokens.shape
    vocab = target.shape[2]
    stop = np.zeros((paths, steps + 1))
    correction = np.zeros((paths, steps + 1, vocab))
    kids = [np.array([c], dtype=np.int64) for c in range(steps)] + [np.zeros(0, dtype=np.int64)]
    for k in range(paths):
        if np.any(draft[k, np.arange(steps), tokens[k]] <= 0):
            continue  # a path the draft cannot produce carries no mass
        for test, mass in stop_law(kids, tokens[k], target[k].__getitem__, draft[k].__getitem__):
            stop[k, test.node + 1] = mass
            correction[k, test.node + 1] = (
                target[k, test.node + 1] if test.owed is None else test.owed
            )
    return StopLaw(stop, correction)
