"""Static draft trees as parent arrays ([GR] Appendix R; SpecTr, SpecInfer).

A draft tree for a batch of rows shares one static shape: ``parents`` is an ``(N,)`` int64
array in topological order (``parents[i] < i``) and ``-1`` marks a child of the root. The root
is the current context; node ``i``'s context is the root context followed by the tokens on the
path to ``i``, ``i`` included. Laws at the contexts are indexed ``0`` (root) and ``i + 1``
(node ``i``), the layout :func:`otlp.verification.verify_tree` takes.

Shapes:

* :func:`chain` — one draft path of length L (single-path speculative sampling, block
  verification).
* :func:`path_tree` — K disjoint chains of length L, the K i.i.d. draft paths of SpecTr and
  GBV; path ``k``'s node at depth ``d`` (1-based) is ``k * L + d - 1``. Duplicates between
  paths are allowed (the verifiers merge equal prefixes).
* :func:`k_ary_tree` — a static tree with ``branching[d]`` children at every node of depth d,
  in breadth-first order (Sequoia/EAGLE-like shapes).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from otlp.args import integers, positive_int
from otlp.limits import check_size
from otlp.solvers.arrays import IntArray


def parents_array(parents: ArrayLike, *, name: str = "parents") -> np.ndarray:
    """``parents`` as a numpy array, unchecked, or a ``ValueError`` naming it where it is not
    rectangular (rows of different lengths: one shape per row must pad none of them)."""
    try:
        return np.asarray(parents)
    except ValueError:
        raise ValueError(
            f"{name}: rows of different lengths; expected one shape (N,) or one per row "
            "(B, N), every row with the same N nodes (mark a row's missing nodes absent "
            "with token -1)"
        ) from None


def check_parents(parents: ArrayLike, *, name: str = "parents") -> IntArray:
    """``parents`` as an int64 array, or a ``ValueError`` naming it (shape, order, range);
    ``name`` is the argument the caller passed it as (e.g. ``speculation.parents``)."""
    arr = parents_array(parents, name=name)
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D array, got shape {arr.shape}")
    if arr.size and (arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer)):
        raise ValueError(f"{name}: expected integer node indices, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    bad = np.flatnonzero((arr < -1) | (arr >= np.arange(arr.shape[0])))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{name}[{i}]: {int(arr[i])} is not -1 (the root) or an earlier node; nodes must "
            f"be in topological order ({name}[i] < i)"
        )
    return arr


def chain(length: int) -> IntArray:
    """A single draft path of ``length`` nodes."""
    return path_tree(1, length)


def path_tree(paths: int, length: int) -> IntArray:
    """``paths`` disjoint chains of ``length`` nodes (path k, depth d -> node k * L + d - 1)."""
    paths = positive_int("paths", paths)
    length = positive_int("length", length, minimum=0)
    check_size("draft tree nodes", paths * length)
    depth_index = np.tile(np.arange(length, dtype=np.int64), paths)
    nodes = np.arange(paths * length, dtype=np.int64)
    return np.where(depth_index == 0, -1, nodes - 1)


def k_ary_tree(branching: Sequence[int]) -> IntArray:
    """A static tree with ``branching[d]`` children at every node of depth d (root: d = 0),
    nodes in breadth-first order."""
    widths = integers("branching", branching, minimum=1)
    check_size("draft tree nodes", int(sum(np.cumprod(widths, dtype=np.float64))))
    parents: list[IntArray] = []
    level = np.array([-1], dtype=np.int64)
    start = 0
    for width in widths:
        children = np.repeat(level, width)
        parents.append(children)
        level = start + np.arange(children.shape[0], dtype=np.int64)
        start += children.shape[0]
    return np.concatenate(parents) if parents else np.zeros(0, dtype=np.int64)


def depth(parents: ArrayLike) -> IntArray:
    """Depth of every node (1 for the root's children)."""
    arr = check_parents(parents)
    out = np.ones(arr.shape[0], dtype=np.int64)
    for i, parent in enumerate(arr):
        if parent >= 0:
            out[i] = out[parent] + 1
    return out


def children(parents: ArrayLike) -> list[IntArray]:
    """Children by context index: entry 0 lists the root's children, entry ``i + 1`` node
    ``i``'s (increasing node order), the layout of the laws ``p[:, i + 1]``."""
    arr = check_parents(parents)
    order = np.argsort(arr, kind="stable")
    counts = np.bincount(arr + 1, minlength=arr.shape[0] + 1)
    return np.split(order, np.cumsum(counts)[:-1])


def ancestors(parents: ArrayLike, node: int) -> IntArray:
    """The nodes on the path from the root to ``node`` (root excluded, ``node`` included)."""
    arr = check_parents(parents)
    node = positive_int("node", node, minimum=0)
    if node >= arr.shape[0]:
        raise ValueError(f"node: expected a node of the tree, in [0, {arr.shape[0]}), got {node}")
    path = []
    while node >= 0:
        path.append(node)
        node = int(arr[node])
    return np.array(path[::-1], dtype=np.int64)


def path_shape(parents: ArrayLike) -> tuple[int, int] | None:
    """``(K, L)`` if ``parents`` is :func:`path_tree` ``(K, L)`` (a chain: K = 1), else None."""
    arr = check_parents(parents)
    roots = int((arr == -1).sum())
    if roots == 0 or arr.shape[0] % roots:
        return None
    shape = (roots, arr.shape[0] // roots)
    return shape if np.array_equal(arr, path_tree(*shape)) else None
