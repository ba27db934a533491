"""SpecTr-style tree traversal with any single-step verifier ([GR] Appendix R).

K i.i.d. draft paths of length L form a draft tree. Starting at the root, at a node u through
which n paths pass, their next tokens form an n-tuple omega, i.i.d. from M_s(. | u) given the
history; a single-step verifier with (p, q, n) = (M_b(. | u), M_s(. | u), n) draws the next
token y ~ pi(. | omega). If y is one of the drafted children the traversal moves to u y (with
the paths through it); otherwise, or at depth L where Y ~ M_b(. | u), it stops and outputs
u y. A lossless verifier keeps every step's marginal equal to M_b(. | u), so the output is
target-matching; a verifier whose marginal is within 15 tau of p (global resolution) keeps
the first tokens within 15 L tau (Theorem R.1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from itertools import product

import numpy as np

from otlp.multistep.law import OutputLaw
from otlp.multistep.table import PrefixTable
from otlp.multistep.verifiers import SingleStepVerifier
from otlp.solvers.arrays import FloatArray, IntArray

LAW_TOL = 1e-6


def traversal_law(
    target: PrefixTable,
    draft: PrefixTable,
    gamma: int,
    paths: int,
    verifier: SingleStepVerifier,
) -> OutputLaw:
    """Exact output law of the traversal, by enumerating (node, multiplicity, drafted tuple).

    ``reach[u, n]`` is the probability that the traversal is at node u with n paths through it.
    """
    vocab = target.vocab_size
    reach = np.zeros((1, paths + 1))
    reach[0, paths] = 1.0
    emissions = []
    for d in range(gamma):
        nxt = np.zeros((vocab ** (d + 1), paths + 1))
        emit = np.zeros((vocab**d, vocab))
        for u in np.flatnonzero(reach.sum(axis=1) > 0):
            p, q = target.conditionals[d][u], draft.conditionals[d][u]
            for n in np.flatnonzero(reach[u]):
                for omega, prob in draft_tuples(q, int(n)):
                    law = checked_law(verifier(p, q, int(n), omega))
                    mass = reach[u, n] * prob * law
                    counts = np.bincount(omega, minlength=vocab)
                    drafted = counts > 0
                    nxt[u * vocab + np.flatnonzero(drafted), counts[drafted]] += mass[drafted]
                    emit[u, ~drafted] += mass[~drafted]
        emissions.append(emit.ravel())
        reach = nxt
    emissions.append((reach.sum(axis=1)[:, None] * target.conditionals[gamma]).ravel())
    return OutputLaw(tuple(emissions), vocab)


def draft_tuples(q: FloatArray, n: int) -> Iterator[tuple[IntArray, float]]:
    """Every ordered n-tuple of i.i.d. draws from q with its probability (ordered, because
    rules such as RRS or K-SEQ depend on the draw order)."""
    support = np.flatnonzero(q > 0)
    for combo in product(support, repeat=n):
        omega = np.asarray(combo, dtype=np.int64)
        yield omega, float(np.prod(q[omega]))


def checked_law(law: object) -> FloatArray:
    """A verifier's output as a probability vector, or ``ValueError`` naming the rule."""
    arr = np.asarray(law, dtype=np.float64)
    if arr.ndim != 1 or (arr < -LAW_TOL).any() or abs(arr.sum() - 1.0) > LAW_TOL:
        raise ValueError("rule: the single-step verifier did not return a probability vector")
    return np.clip(arr, 0.0, None)


def sample_traversal(
    target: Callable[[tuple[int, ...]], FloatArray],
    draft: Callable[[tuple[int, ...]], FloatArray],
    drafts: IntArray,
    verifier: SingleStepVerifier,
    rng: np.random.Generator,
) -> list[int]:
    """One traversal of the draft tree ``drafts`` (K paths, shape ``(K, L)``); returns u y.

    ``target`` and ``draft`` map a prefix (relative to the decoding context) to its law.
    """
    active = np.arange(drafts.shape[0])
    prefix: list[int] = []
    for d in range(drafts.shape[1]):
        key = tuple(prefix)
        omega = drafts[active, d]
        y = draw(rng, checked_law(verifier(target(key), draft(key), omega.shape[0], omega)))
        prefix.append(y)
        active = active[omega == y]
        if active.shape[0] == 0:
            return prefix
    prefix.append(draw(rng, target(tuple(prefix))))
    return prefix


def draw(rng: np.random.Generator, law: Sequence[float] | FloatArray) -> int:
    """One index from a (possibly slightly unnormalised) probability vector."""
    cdf = np.cumsum(law)
    return int(min(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"), len(cdf) - 1))
