"""The static draft-tree shapes of :mod:`otlp.verification.shapes`: their layouts, the checks
of a parent array (naming the argument the caller passed), and the size refusals at the
configured limit, boundary included (the module's mutation round, issue 39)."""

from __future__ import annotations

import numpy as np
import pytest

from otlp.limits import ProblemTooLarge, limited
from otlp.verification import shapes


def test_path_tree_and_chain_layouts():
    """Path k's node at depth d is k * L + d - 1; its first node is a child of the root."""
    assert shapes.path_tree(3, 2).tolist() == [-1, 0, -1, 2, -1, 4]
    assert shapes.path_tree(1, 4).tolist() == [-1, 0, 1, 2]
    assert shapes.chain(4).tolist() == [-1, 0, 1, 2]
    assert shapes.path_tree(2, 1).tolist() == [-1, -1]
    for out in (shapes.path_tree(2, 3), shapes.chain(3), shapes.path_tree(3, 0)):
        assert out.dtype == np.int64
    assert shapes.path_tree(3, 0).shape == (0,)  # zero-length paths: no nodes
    with pytest.raises(ValueError, match=r"^paths: must be at least 1, got 0"):
        shapes.path_tree(0, 2)
    with pytest.raises(ValueError, match=r"^length: must be at least 0, got -1"):
        shapes.path_tree(1, -1)


def test_k_ary_tree_is_breadth_first():
    assert shapes.k_ary_tree((2, 3)).tolist() == [-1, -1, 0, 0, 0, 1, 1, 1]
    assert shapes.k_ary_tree((1, 2, 2)).tolist() == [-1, 0, 0, 1, 1, 2, 2]
    assert shapes.k_ary_tree((3,)).tolist() == [-1, -1, -1]
    # four levels: each level's first node index counts every node of the levels above
    assert shapes.k_ary_tree((1, 1, 1, 1)).tolist() == [-1, 0, 1, 2]
    assert shapes.k_ary_tree((2, 1, 1, 2)).tolist() == [-1, -1, 0, 1, 2, 3, 4, 4, 5, 5]
    empty = shapes.k_ary_tree(())
    assert empty.shape == (0,) and empty.dtype == np.int64
    assert shapes.k_ary_tree((2, 2)).dtype == np.int64
    with pytest.raises(ValueError, match=r"^branching\[1\]: must be at least 1, got 0"):
        shapes.k_ary_tree((2, 0))


def test_tree_sizes_are_refused_beyond_the_limit_boundary_included():
    """A tree of exactly max_variables nodes is built; one node more is refused before it is
    allocated, with the number of nodes it would have."""
    with limited(max_variables=6):
        assert shapes.path_tree(2, 3).shape == (6,)
        assert shapes.path_tree(3, 2).shape == (6,)
        assert shapes.k_ary_tree((2, 2)).shape == (6,)  # 2 + 4 nodes
        with pytest.raises(ProblemTooLarge, match=r"^draft tree nodes would need 7 variables"):
            shapes.path_tree(1, 7)
        with pytest.raises(ProblemTooLarge, match=r"^draft tree nodes would need 8 variables"):
            shapes.path_tree(2, 4)
        with pytest.raises(ProblemTooLarge, match=r"^draft tree nodes would need 8 variables"):
            shapes.k_ary_tree((2, 3))  # 2 + 6 nodes
        with pytest.raises(ProblemTooLarge, match=r"^draft tree nodes would need 7 variables"):
            shapes.k_ary_tree((1, 1, 1, 1, 1, 1, 1))
    # the count itself must not overflow: 3 + 3 * 2**62 nodes wrap below 0 in int64
    with pytest.raises(ProblemTooLarge, match=r"^draft tree nodes would need 13,835,058,055"):
        shapes.k_ary_tree((3, 2**62))


def test_check_parents_accepts_topological_parent_arrays_as_int64():
    out = shapes.check_parents(np.array([-1, 0, 0, -1, 3], dtype=np.int32))
    assert out.dtype == np.int64 and out.tolist() == [-1, 0, 0, -1, 3]
    assert shapes.check_parents([-1, -1, 1]).tolist() == [-1, -1, 1]
    none = shapes.check_parents([])  # no nodes (np.asarray([]) is float64, and allowed)
    assert none.shape == (0,) and none.dtype == np.int64


@pytest.mark.parametrize(
    ("parents", "match"),
    [
        ([[-1, 0], [-1, 0]], r"^tree: expected a 1-D array, got shape \(2, 2\)"),
        (np.int64(-1), r"^tree: expected a 1-D array, got shape \(\)"),
        ([-1.0, 0.0], r"^tree: expected integer node indices, got dtype float64"),
        ([True, False], r"^tree: expected integer node indices, got dtype bool"),
        (
            [-1, 0, -2],
            r"^tree\[2\]: -2 is not -1 \(the root\) or an earlier node; nodes must be "
            r"in topological order \(tree\[i\] < i\)$",
        ),
        ([-1, 1, 0], r"^tree\[1\]: 1 is not -1"),  # a node as its own parent
        ([-1, 0, 3, 9], r"^tree\[2\]: 3 is not -1"),  # the first bad node is named
        ([0], r"^tree\[0\]: 0 is not -1"),
        ([[-1, 0], [-1]], r"^tree: rows of different lengths"),
    ],
)
def test_check_parents_refuses_by_the_callers_name(parents, match):
    with pytest.raises(ValueError, match=match):
        shapes.check_parents(parents, name="tree")


def test_parents_array_names_ragged_rows_and_reads_rectangular_ones_as_given():
    with pytest.raises(
        ValueError,
        match=r"^speculation\.parents: rows of different lengths; expected one shape \(N,\) or "
        r"one per row \(B, N\), every row with the same N nodes \(mark a row's missing nodes "
        r"absent with token -1\)$",
    ):
        shapes.parents_array([[-1, 0, 1], [-1, 0]], name="speculation.parents")
    with pytest.raises(ValueError, match=r"^parents: rows of different lengths"):
        shapes.parents_array([[-1, 0, 1], [-1, 0]])
    rows = shapes.parents_array([[-1, 0], [-1, -1]])
    assert rows.shape == (2, 2) and rows.tolist() == [[-1, 0], [-1, -1]]
    with pytest.raises(ValueError, match=r"^parents: expected a 1-D array"):
        shapes.check_parents([[-1, 0], [-1, -1]])


def test_depth_children_and_ancestors():
    tree = np.array([-1, -1, 0, 0, 2, 1])
    assert shapes.depth(tree).tolist() == [1, 1, 2, 2, 3, 2]
    assert shapes.depth(tree).dtype == np.int64
    assert shapes.depth([]).tolist() == []
    kids = shapes.children(tree)
    assert [k.tolist() for k in kids] == [[0, 1], [2, 3], [5], [4], [], [], []]
    assert len(shapes.children([])) == 1 and shapes.children([])[0].tolist() == []
    assert [k.tolist() for k in shapes.children([-1, -1, -1])] == [[0, 1, 2], [], [], []]
    # every context's children in increasing node order, on a tree large enough that an
    # unstable sort of the parents would interleave them
    rng = np.random.default_rng(0)
    wide = np.concatenate([np.full(10, -1), rng.integers(-1, 10, size=3000)])
    for context, kids in enumerate(shapes.children(wide)):
        assert kids.tolist() == np.flatnonzero(wide == context - 1).tolist()
    assert shapes.ancestors(tree, 4).tolist() == [0, 2, 4]
    assert shapes.ancestors(tree, 1).tolist() == [1]
    assert shapes.ancestors(tree, 5).tolist() == [1, 5]
    assert shapes.ancestors(tree, 0).dtype == np.int64
    with pytest.raises(ValueError, match=r"^node: expected a node of the tree, in \[0, 6\), got 6"):
        shapes.ancestors(tree, 6)
    with pytest.raises(ValueError, match=r"^node: must be at least 0, got -1"):
        shapes.ancestors(tree, -1)
    with pytest.raises(ValueError, match=r"^parents\[1\]: 5 is not -1"):
        shapes.depth([-1, 5])


def test_path_shape_recognises_exactly_the_path_trees():
    assert shapes.path_shape(shapes.path_tree(3, 2)) == (3, 2)
    assert shapes.path_shape(shapes.chain(5)) == (1, 5)
    assert shapes.path_shape(shapes.path_tree(4, 1)) == (4, 1)
    assert shapes.path_shape([]) is None  # no root's child
    assert shapes.path_shape([-1, 0, -1]) is None  # 3 nodes over 2 paths
    assert shapes.path_shape([-1, -1, 0, 1]) is None  # 2 roots, 4 nodes, not 2 chains
    assert shapes.path_shape([-1, 0, 0]) is None
    assert shapes.path_shape(shapes.k_ary_tree((2, 2))) is None
