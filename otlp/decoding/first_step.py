"""Every rule at the first step of a prompt, on the same drafted trees.

A decode run's block efficiency averages over the contexts the decode visits; the optimum and
its bound (:func:`otlp.multistep.block_efficiency_bound`, docs/optimum.md) are for one
drafting law at one context. :func:`measure_first_step` measures the rules where the bound applies:
the expected number of tokens one verification call emits (accepted drafts + 1, the block
efficiency) at the prompt, by Monte Carlo over drafted trees. Each tree is drafted once (step
1 of the loop, :func:`otlp.decoding.loop.draft_tree`), scored by one target forward, and
verified by every rule with :func:`otlp.verification.tree.verify_tree` (the same seed for every
rule): common random numbers, so the differences between rules are measured on the same trees
([GBV] §2 defines block efficiency; [GR] Appendix R the node-by-node traversal).

Wrap target and draft in :class:`~otlp.decoding.models.memo.MemoizedTreeLM` so that the
prefixes the trees repeat (the prompt, the likely first tokens) are evaluated once.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from otlp.args import integers, positive_int
from otlp.decoding.models.base import TreeModel
from otlp.errors import ProblemTooLarge
from otlp.solvers.arrays import FloatArray, IntArray


@dataclass(frozen=True)
class FirstStep:
    """Tokens emitted by each rule on the same ``samples`` drafted trees (tree i is row i of
    every array; the mean over the ``repeats`` verifications of the tree), and the rules
    refused with the reason (a problem over :mod:`otlp.limits`)."""

    samples: int
    repeats: int
    emitted: dict[str, FloatArray]
    refused: dict[str, str] = field(default_factory=dict)

    def mean(self, method: str) -> float:
        """Block efficiency: the mean tokens emitted per call."""
        return float(self.emitted[method].mean())

    def se(self, method: str) -> float:
        """Standard error of :meth:`mean` over the trees."""
        return _se(self.emitted[method])

    def difference(self, method: str, other: str) -> tuple[float, float]:
        """``method``'s block efficiency minus ``other``'s and its standard error, paired
        over the same trees."""
        diff = self.emitted[method] - self.emitted[other]
        return float(diff.mean()), _se(diff)


def measure_first_step(
    target: TreeModel,
    draft: TreeModel,
    prompt: Sequence[int],
    parents: IntArray,
    methods: Sequence[str],
    *,
    scheme: str = "iid",
    samples: int,
    top_k: int | None = None,
    tau: float | None = None,
    chunk: int = 16,
    repeats: int = 1,
    seed: int = 0,
) -> FirstStep:
    """Draft ``samples`` trees of shape ``parents`` at ``prompt`` (children by ``scheme``,
    from the draft's top ``top_k`` tokens when given), ``chunk`` trees per model call, and
    verify each with every rule of ``methods`` (``top_k`` as the decode loop passes it, and
    ``tau`` to the rules that take it: global resolution's error threshold).

    Tree i is drafted with ``default_rng((seed, i, 0))`` and verified ``repeats`` times by
    every rule, the r-th time with ``default_rng((seed, i, 1 + r))``; its figure is the mean
    of the ``repeats`` counts. Verifying a tree again costs no model call, and it shrinks the
    share of the standard error due to the verification's own randomness (nearly all of it,
    for the difference between two rules on the same trees). A rule whose problem on some
    tree is over the size limits (``otlp.ProblemTooLarge``) is listed in
    ``FirstStep.refused`` with the reason and measured on no tree."""
    from otlp.decoding.loop import draft_tree
    from otlp.decoding.models.base import check_model
    from otlp.verification.rule_table import get
    from otlp.verification.shapes import check_parents
    from otlp.verification.tree import verify_tree

    check_model("target", target)
    vocab = check_model("draft", draft)
    parents = check_parents(parents)
    if parents.size == 0:
        raise ValueError("parents: expected a tree of at least one node, got none")
    if isinstance(methods, str | bytes) or not isinstance(methods, Sequence) or not methods:
        raise ValueError(f"methods: expected a non-empty list of method names, got {methods!r}")
    for method in methods:
        try:
            get(method)
        except ValueError as error:
            raise ValueError(f"methods: {error}") from None
    if top_k is not None:
        top_k = positive_int("top_k", top_k, maximum=vocab)
    samples = positive_int("samples", samples)
    chunk = positive_int("chunk", chunk)
    repeats = positive_int("repeats", repeats)
    seed = positive_int("seed", seed, minimum=0)
    prompt = integers("prompt", prompt, minimum=0)
    takes_tau = {m: get(m).takes_tau for m in methods}
    emitted = {m: np.zeros(samples) for m in methods}
    refused: dict[str, str] = {}
    for start in range(0, samples, chunk):
        trees = np.arange(start, min(start + chunk, samples))
        rows = np.arange(trees.size)
        rngs = [np.random.default_rng((seed, int(i), 0)) for i in trees]
        dft = draft.session([prompt] * trees.size)
        tokens, q, fed = draft_tree(dft, rows, parents, scheme, top_k, rngs)
        p = target.session([prompt] * trees.size).forward(tokens, parents, rows)
        unfed = np.setdiff1d(np.arange(parents.size), np.fromiter(fed, dtype=np.int64))
        q[:, unfed + 1] = p[:, unfed + 1]  # laws after the deepest nodes: never read
        for method, r in itertools.product(methods, range(repeats)):
            if method in refused:
                continue
            try:
                result = verify_tree(
                    tokens,
                    parents,
                    p,
                    q,
                    method=method,
                    scheme=scheme,
                    top_k=top_k,
                    tau=tau if takes_tau[method] else None,
                    rng=[np.random.default_rng((seed, int(i), 1 + r)) for i in trees],
                )
            except ProblemTooLarge as error:
                refused[method] = str(error)
                continue
            emitted[method][trees] += (np.asarray(result.num_accepted) + 1) / repeats
    kept = {m: e for m, e in emitted.items() if m not in refused}
    return FirstStep(samples, repeats, kept, refused)


def _se(values: FloatArray) -> float:
    return float(values.std(ddof=1) / np.sqrt(values.size)) if values.size > 1 else float("nan")
