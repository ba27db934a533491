"""The searched instance classes: seeded position and tree cases, adversarial first.

Position cases take their (p, q) from ``otlp fuzz``'s instance classes
(:data:`otlp.fuzz.classes.INSTANCE_CLASSES`: one-hot and near-one-hot p or q, ties, disjoint
supports, p = q, subnormal and 1e-300 masses, peaked drafts, float32/float16 roundings),
renormalised in float64, on V = 2..8 with n = 1..3 drafts (two independent drafters); a
case whose draft cannot produce n distinct tokens (without replacement) is redrawn.
Real-vocabulary cases come from the SmolLM2-135M states of the shipped suite
(``otlp.instances.load("smollm2")``, V = 1001).

Tree cases draw every context's (target, draft) law pair from one class, on V = 2..3 and the
small shapes of :data:`DEFAULT_SHAPES` (chains of 1 to 3 nodes, two paths of two, a root with
two or three children, a 2 x 2 tree); the two branching three-deep shapes of :data:`TREE_SHAPES`,
fork3 and fork3x2, are searched when named (a subject whose rule only goes wrong three deep
declares them). *Truncated* tree cases (for engines handed logits that top-k / top-p
truncate, :mod:`otlp.referee.logits`) are on V = 3..4 and every target law is cut to its
V - 1 likeliest tokens (V - 2 a quarter of the time; ties by token id) and renormalised, as a
truncated law is: zero mass where the engine must remove it.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from otlp.referee.cases import PositionCase, TreeCase
from otlp.verification.drafting import restrict_top_k
from otlp.verification.shapes import depth

# Tree shapes by name: parent arrays (a node's parent precedes it; -1 = root). The ones searched
# by default (at most two deep, or a chain):
_DEFAULT_TREES: dict[str, tuple[int, ...]] = {
    "chain1": (-1,),
    "chain2": (-1, 0),
    "chain3": (-1, 0, 1),
    "root2": (-1, -1),
    "root3": (-1, -1, -1),
    "paths2x2": (-1, 0, -1, 2),
    "tree2x1": (-1, -1, 0, 1),
    "tree2x2": (-1, -1, 0, 0, 1, 1),
}
# Three deep, by name only: one root child with two children, the second with a child (fork3), or
# each with one (fork3x2).
_NAMED_TREES: dict[str, tuple[int, ...]] = {
    "fork3": (-1, 0, 0, 2),
    "fork3x2": (-1, 0, 0, 1, 2),
}
TREE_SHAPES: dict[str, tuple[int, ...]] = {**_DEFAULT_TREES, **_NAMED_TREES}
DEFAULT_SHAPES = tuple(_DEFAULT_TREES)
CHAIN_SHAPES = ("chain1", "chain2", "chain3")
MAX_V = 8


def check_shapes(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` as a tuple if each names a shape of :data:`TREE_SHAPES`, else a ``ValueError``
    naming ``shapes`` that lists the unknown ones and the known."""
    names = tuple(names)
    unknown = [s for s in names if s not in TREE_SHAPES]
    if unknown:
        raise ValueError(f"shapes: unknown {unknown}; known: {', '.join(TREE_SHAPES)}")
    return names


def searched_shapes(names: Iterable[str] | None, max_children: int | None) -> tuple[str, ...]:
    """The tree shapes the referee searches: ``names`` (checked), else for a sampler taking one
    child per node (``max_children`` 1, ``names`` None) the chains, else :data:`DEFAULT_SHAPES`
    (also for no names)."""
    if names is None:
        return CHAIN_SHAPES if max_children == 1 else DEFAULT_SHAPES
    return check_shapes(names) or DEFAULT_SHAPES


def class_names() -> list[str]:
    from otlp.fuzz.classes import INSTANCE_CLASSES

    return list(INSTANCE_CLASSES)


def _law_pair(name: str, rng: np.random.Generator, vocab: int) -> tuple[np.ndarray, np.ndarray]:
    from otlp.fuzz.classes import INSTANCE_CLASSES

    p, q = INSTANCE_CLASSES[name](rng, vocab)
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    return p / p.sum(), q / q.sum()


def position_cases(
    count: int, scheme: str, seed: int = 0, *, max_n: int = 3, max_vocab: int = MAX_V
) -> list[PositionCase]:
    """``count`` seeded position cases of ``scheme``, cycling through the classes."""
    rng = np.random.default_rng([seed, 26])
    names = class_names()
    out: list[PositionCase] = []
    while len(out) < count:
        name = names[len(out) % len(names)]
        vocab = int(rng.integers(2, max_vocab + 1))
        n = int(rng.integers(1, max_n + 1))
        p, q = _law_pair(name, rng, vocab)
        if scheme == "independent":  # two drafters, as otlp.verify_drafts takes them
            n = 2
            q = np.stack([q, _law_pair(name, rng, vocab)[1]])
        if scheme == "without_replacement" and np.count_nonzero(q) < n:
            continue
        out.append(PositionCase(p, q, n, scheme, f"{name} V={vocab} n={n}"))
    return out


def smollm2_cases(count: int, scheme: str, n: int = 2, seed: int = 0) -> list[PositionCase]:
    """``count`` SmolLM2-135M states (V = 1001) of the shipped suite, spread over it."""
    import otlp.instances

    items = otlp.instances.load("smollm2").items
    picks = np.random.default_rng([seed, 135]).choice(len(items), size=count, replace=False)
    out = []
    for i in sorted(int(k) for k in picks):
        item = items[i]
        q = item.draft(scheme)
        n_here = 2 if scheme == "independent" else n
        out.append(PositionCase(item.p, q, n_here, scheme, item.name))
    return out


def tree_cases(
    count: int,
    scheme: str,
    seed: int = 0,
    *,
    shapes: tuple[str, ...] = DEFAULT_SHAPES,
    truncated: bool = False,
) -> list[TreeCase]:
    """``count`` seeded tree cases of ``scheme`` on the named ``shapes``; ``truncated``:
    truncated target laws on V = 3..4 (module notes)."""
    rng = np.random.default_rng([seed, 28 if truncated else 27])
    names = class_names()
    out: list[TreeCase] = []
    while len(out) < count:
        name = names[len(out) % len(names)]
        shape = shapes[int(rng.integers(len(shapes)))]
        parents = np.array(TREE_SHAPES[shape], dtype=np.int64)
        vocab = int(rng.integers(3, 5) if truncated else rng.integers(2, 4))
        label = f"{name} V={vocab} {shape}" + (" truncated" if truncated else "")
        try:  # without replacement, a draft with too few tokens is refused: drawn again
            case = _tree_case(name, rng, vocab, parents, scheme, label, truncated)
        except ValueError:
            continue
        out.append(case)
    return out


def _tree_case(
    name: str,
    rng: np.random.Generator,
    vocab: int,
    parents: np.ndarray,
    scheme: str,
    label: str,
    truncated: bool = False,
) -> TreeCase:
    levels = int(depth(parents).max()) + 1
    target, draft = [], []
    for d in range(levels):
        pairs = [_law_pair(name, rng, vocab) for _ in range(vocab**d)]
        laws = [a for a, _ in pairs]
        if truncated:
            laws = [
                restrict_top_k(law[None], vocab - 1 - int(rng.random() < 0.25))[0] for law in laws
            ]
        target.append(np.array(laws))
        draft.append(np.array([b for _, b in pairs]))
    return TreeCase(tuple(target), tuple(draft), parents, scheme, label)
