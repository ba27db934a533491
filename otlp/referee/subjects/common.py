"""What the field's samplers share: the rejection residual, a one-uniform draw, the checks of
the two protocols' arguments, and the node-by-node walk of a draft tree.

Two protocols (the referee's, :mod:`otlp.referee.subjects`):

* position — ``sampler(p, q, drafts, rng) -> int``: ``p`` (V,), ``q`` (V,) or (n, V) (one
  law per drafter), ``drafts`` (n,) token ids drawn from ``q``;
* tree — ``sampler(tokens, parents, p, q, rng) -> (nodes, bonus)``: one row of
  :func:`otlp.decoding.verify_tree`'s layout, ``tokens`` (N,) (-1 = absent), ``parents`` (N,)
  with ``parents[i] < i`` (-1 = the root), ``p``, ``q`` (N + 1, V) the laws at the contexts
  (0 the root, i + 1 node i's); returns the accepted root-to-node path and the bonus token.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from otlp.solvers.arrays import FloatArray, IntArray

# A position rule on checked arguments: p (V,), one draft law per draft (n, V), drafts (n,).
PositionRule = Callable[[FloatArray, FloatArray, IntArray, np.random.Generator], int]


def residual(target: FloatArray, draft: FloatArray) -> FloatArray:
    """norm(max(target - draft, 0)), the law a rejection hands on (Leviathan et al. 2023,
    Chen et al. 2023); ``target`` itself where rounding leaves nothing (a rejection has
    probability 0 then)."""
    left = np.maximum(target - draft, 0.0)
    total = left.sum()
    return left / total if total > 0.0 else target


def draw(law: FloatArray, rng: np.random.Generator) -> int:
    """One token from a nonnegative (possibly unnormalised) ``law`` by ``rng.choice`` (inverse
    CDF, never a token of probability 0), which the referee's exact mode can enumerate."""
    return int(rng.choice(law.shape[0], p=law / law.sum()))


def accepts(rng: np.random.Generator, target_mass: float, draft_mass: float) -> bool:
    """The coin of speculative sampling: u < min(1, target_mass / draft_mass), u ~ U[0, 1)."""
    return bool(rng.random() * draft_mass < target_mass)


def position_args(
    p: ArrayLike, q: ArrayLike, drafts: ArrayLike, *, one_law: bool = False
) -> tuple[FloatArray, FloatArray, IntArray]:
    """``p`` (V,), ``q`` as (n, V) (a single law repeated per draft) and ``drafts`` (n,),
    checked: shapes, ids in range, positive draft probability at each draft. ``one_law``:
    the sampler takes one draft law (V,) only."""
    target = np.asarray(p, dtype=np.float64)
    if target.ndim != 1 or target.shape[0] == 0:
        raise ValueError(f"p: expected shape (V,), got {target.shape}")
    tokens = np.asarray(drafts)
    if tokens.ndim != 1 or (tokens.size and not np.issubdtype(tokens.dtype, np.integer)):
        raise ValueError(f"drafts: expected integer token ids of shape (n,), got {tokens!r}")
    tokens = tokens.astype(np.int64, copy=False)
    vocab, n = target.shape[0], tokens.shape[0]
    law = np.asarray(q, dtype=np.float64)
    if law.shape != (vocab,) and (one_law or law.shape != (n, vocab)):
        wanted = f"({vocab},)" if one_law else f"({vocab},) or (n = {n}, {vocab})"
        raise ValueError(f"q: expected shape {wanted}, got {law.shape}")
    laws = np.broadcast_to(law, (n, vocab))
    if n and (tokens.min() < 0 or tokens.max() >= vocab):
        raise ValueError(f"drafts: token ids must lie in [0, {vocab}), got {tokens.tolist()}")
    if n and np.any(laws[np.arange(n), tokens] <= 0.0):
        raise ValueError(f"drafts: a draft of zero draft probability in {tokens.tolist()}")
    return target, laws, tokens


def tree_args(
    tokens: ArrayLike, parents: ArrayLike, p: ArrayLike, q: ArrayLike
) -> tuple[IntArray, IntArray, FloatArray, FloatArray]:
    """One row of :func:`otlp.decoding.verify_tree`'s layout, checked: ``tokens`` (N,) with -1
    for absent nodes, ``parents`` (N,) with ``parents[i] < i``, ``p``, ``q`` (N + 1, V)."""
    shape = np.asarray(parents)
    if shape.ndim != 1 or (shape.size and not np.issubdtype(shape.dtype, np.integer)):
        raise ValueError(f"parents: expected integer parent ids of shape (N,), got {shape!r}")
    shape = shape.astype(np.int64, copy=False)
    nodes = shape.shape[0]
    if np.any((shape < -1) | (shape >= np.arange(nodes))):
        raise ValueError(f"parents: need -1 <= parents[i] < i, got {shape.tolist()}")
    row = np.asarray(tokens)
    if row.shape != (nodes,) or (row.size and not np.issubdtype(row.dtype, np.integer)):
        raise ValueError(f"tokens: expected integer ids of shape (N = {nodes},), got {row!r}")
    row = row.astype(np.int64, copy=False)
    target = np.asarray(p, dtype=np.float64)
    draft = np.asarray(q, dtype=np.float64)
    for name, law in (("p", target), ("q", draft)):
        if law.ndim != 2 or law.shape[0] != nodes + 1 or law.shape[1] == 0:
            raise ValueError(f"{name}: expected shape (N + 1 = {nodes + 1}, V), got {law.shape}")
    if draft.shape != target.shape:
        raise ValueError(f"q: shape {draft.shape} differs from p's {target.shape}")
    if nodes and (row.min() < -1 or row.max() >= target.shape[1]):
        raise ValueError(f"tokens: ids must be -1 or lie in [0, {target.shape[1]})")
    present = row >= 0
    if np.any(present & (shape >= 0) & ~present[np.maximum(shape, 0)]):
        raise ValueError("tokens: a present node under an absent parent")
    return row, shape, target, draft


def first_child_chain(tokens: IntArray, parents: IntArray) -> list[int]:
    """The chain of first present children from the root: what a chain verifier reads of a
    tree (the whole chain when the tree is one)."""
    chain: list[int] = []
    node = -1
    while True:
        kids = np.flatnonzero((parents == node) & (tokens >= 0))
        if kids.shape[0] == 0:
            return chain
        node = int(kids[0])
        chain.append(node)


def present_children(row: IntArray, shape: IntArray) -> list[list[int]]:
    """The present children (``row >= 0``) of every context, in node order: entry 0 the
    root's, entry ``i + 1`` node ``i``'s."""
    kids: list[list[int]] = [[] for _ in range(row.shape[0] + 1)]
    for i in np.flatnonzero(row >= 0):
        kids[shape[i] + 1].append(int(i))
    return kids


def walk_tree(
    tokens: ArrayLike,
    parents: ArrayLike,
    p: ArrayLike,
    q: ArrayLike,
    rng: np.random.Generator,
    step: PositionRule,
    *,
    first_child_only: bool = False,
) -> tuple[list[int], int]:
    """The node-by-node walk every tree verifier in the field shares (SpecInfer, Sequoia,
    EAGLE): from the root, ``step`` verifies the present children's tokens (child order is
    draw order) with the laws at the node's context (the draft law once per child) and
    returns a token; if it is a child's token the walk moves to the first such child,
    otherwise it is the correction token and the walk stops; at a node without present
    children the bonus token is drawn from p. ``first_child_only``: a chain verifier, which
    reads the first present child of each node only (the chain of first children, drafted
    from q at each context under every scheme)."""
    row, shape, target, draft = tree_args(tokens, parents, p, q)
    kids = present_children(row, shape)
    path: list[int] = []
    node = -1
    while True:
        children = kids[node + 1][:1] if first_child_only else kids[node + 1]
        if not children:
            return path, draw(target[node + 1], rng)
        omega = row[children]
        law = draft[node + 1]
        if np.any(law[omega] <= 0.0):
            raise ValueError(f"tokens: a drafted token of zero draft probability in {omega}")
        y = step(target[node + 1], np.broadcast_to(law, (omega.shape[0], law.shape[0])), omega, rng)
        matched = [c for c in children if row[c] == y]
        if not matched:
            return path, y
        node = matched[0]
        path.append(node)
