"""The exact law of one verification call on a small model, over every tree it can draft.

:func:`call_law` enumerates every token assignment of a tree shape (V ** N of them), weighs
each drafted tree by its drafting probability (children of a node drawn from the draft law at
its context, i.i.d. or without replacement) and sums :func:`~otlp.verification.tree.outcome_law`
over them: the law of the emitted tokens (accepted path + bonus) and the expected number of
accepted draft tokens (block efficiency - 1) of any :data:`~otlp.verification.tree.METHODS`
rule on that shape. Continued by the target to the tree's depth + 1 (:meth:`CallLaw.extended`),
a lossless rule's law is the target's ([GBV] Definition 3.1).

``target`` and ``draft`` map a prefix (tuple of token ids) to a next-token law, as the toy
models of :mod:`otlp.multistep.models`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from otlp.args import positive_int
from otlp.limits import check_size, power
from otlp.multistep.models import Model as MultistepModel
from otlp.multistep.models import prefix_index
from otlp.multistep.optimum import branching_of, check_scheme
from otlp.multistep.table import PrefixTable, tabulate
from otlp.solvers.arrays import FloatArray
from otlp.verification import shapes as trees
from otlp.verification.drafting import children_probability
from otlp.verification.tree import outcome_law

Model = Callable[[tuple[int, ...]], Any]


@dataclass(frozen=True)
class CallLaw:
    """``emitted``: P(a call emits that token sequence), over every drafted tree."""

    emitted: dict[tuple[int, ...], float]
    vocab_size: int
    depth: int

    @property
    def expected_accepted(self) -> float:
        """E[accepted draft tokens] per call (block efficiency - 1)."""
        return float(sum(mass * (len(seq) - 1) for seq, mass in self.emitted.items()))

    def extended(self, target: Model) -> FloatArray:
        """The law of the first depth + 1 tokens: the call's output continued by ``target``
        (lexicographic over V ** (depth + 1) sequences)."""
        length = self.depth + 1
        out = np.zeros(self.vocab_size**length)
        pending = list(self.emitted.items())
        while pending:
            seq, mass = pending.pop()
            if len(seq) == length:
                out[int(np.ravel_multi_index(seq, (self.vocab_size,) * length))] += mass
                continue
            law = np.asarray(target(seq), dtype=float)
            pending.extend(((*seq, int(y)), mass * law[y]) for y in np.flatnonzero(law > 0))
        return out


def call_law(
    target: Model,
    draft: Model,
    parents: ArrayLike,
    method: str,
    *,
    scheme: str = "iid",
    vocab_size: int | None = None,
    **options: Any,
) -> CallLaw:
    """Exact law of one :func:`~otlp.verification.tree.verify_tree` call of ``method`` on the
    tree ``parents`` drafted from ``draft`` by ``scheme`` (``options`` as ``outcome_law``)."""
    shape = trees.check_parents(parents)
    vocab = vocab_size if vocab_size is not None else len(np.asarray(target(())))
    nodes = shape.shape[0]
    check_size("drafted trees (V ** N)", power(vocab, nodes), advice="use a smaller tree or V")
    kids = trees.children(shape)
    depth = int(trees.depth(shape).max()) if nodes else 0
    out: dict[tuple[int, ...], float] = {}
    for combo in itertools.product(range(vocab), repeat=nodes):
        tokens = np.array(combo, dtype=np.int64)
        prefixes: list[tuple[int, ...]] = [()]
        for i, parent in enumerate(shape):
            prefixes.append((*prefixes[parent + 1], int(tokens[i])))
        q = np.array([np.asarray(draft(prefix), dtype=float) for prefix in prefixes])
        mass = 1.0
        for context, below in enumerate(kids):
            if below.shape[0] and mass > 0.0:
                mass *= children_probability(q[context], tokens[below], scheme)
        if mass == 0.0:
            continue
        p = np.array([np.asarray(target(prefix), dtype=float) for prefix in prefixes])
        law = outcome_law(tokens, shape, p, q, method=method, scheme=scheme, **options)
        for seq, prob in law.items():
            out[seq] = out.get(seq, 0.0) + mass * prob
    return CallLaw(out, vocab, depth)


def rule_block_efficiency(
    target: MultistepModel | PrefixTable,
    draft: MultistepModel | PrefixTable,
    gamma: int,
    method: str,
    *,
    shape: str | Sequence[int] = "paths1",
    scheme: str = "iid",
    context: tuple[int, ...] = (),
    **options: Any,
) -> float:
    """A tree rule's exact block efficiency on a tree drafting law, the number to set beside
    :func:`otlp.multistep.optimal_block_efficiency` (same arguments): 1 + the expected
    accepted length of :func:`call_law` on the tree ``shape`` lays out (``"paths{K}"`` as
    :func:`~otlp.verification.shapes.path_tree`, ``"kary{k}"`` or children per depth as
    :func:`~otlp.verification.shapes.k_ary_tree`), with the models tabulated after
    ``context``. ``options`` go to :func:`~otlp.verification.tree.outcome_law` (``tau``,
    ``top_k``, ``ranking``)."""
    gamma = positive_int("gamma", gamma)
    branching = branching_of(shape, gamma)
    scheme = check_scheme(scheme)
    tgt = tabulate(target, gamma + 1, context=context, name="target")
    dft = tabulate(draft, gamma, context=context, name="draft")
    paths = isinstance(shape, str) and shape.strip().lower().startswith("paths")
    parents = trees.path_tree(branching[0], gamma) if paths else trees.k_ary_tree(branching)
    law = call_law(_lookup(tgt), _lookup(dft), parents, method, scheme=scheme, **options)
    return 1.0 + law.expected_accepted


def _lookup(table: PrefixTable) -> Model:
    """A tabulated model as a prefix -> law callable (uniform past its depth: a leaf's draft
    law is never read)."""
    vocab = table.vocab_size
    uniform = np.full(vocab, 1.0 / vocab)

    def law(prefix: tuple[int, ...]) -> FloatArray:
        if len(prefix) >= table.depth:
            return uniform
        index = prefix_index(np.array([prefix], dtype=np.int64).reshape(1, -1), vocab)[0]
        return table.conditionals[len(prefix)][index]

    return law
