"""Draft-tree shapes and drafting (otlp.verification.shapes, otlp.verification.drafting)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from otlp import decoding
from otlp.decoding import (
    children_probability,
    k_ary_tree,
    node_law,
    path_shape,
    path_tree,
    restrict_top_k,
    sample_children,
)
from otlp.verification.drafting import check_node, draft_joint


def test_shapes():
    assert path_tree(2, 3).tolist() == [-1, 0, 1, -1, 3, 4]
    assert decoding.chain(3).tolist() == [-1, 0, 1]
    assert k_ary_tree((2, 2)).tolist() == [-1, -1, 0, 0, 1, 1]
    assert decoding.depth(k_ary_tree((2, 3))).tolist() == [1, 1] + [2] * 6
    kids = decoding.children(k_ary_tree((2, 2)))
    assert [k.tolist() for k in kids] == [[0, 1], [2, 3], [4, 5], [], [], [], []]
    assert decoding.ancestors(path_tree(2, 3), 5).tolist() == [3, 4, 5]
    assert path_shape(path_tree(3, 2)) == (3, 2)
    assert path_shape(k_ary_tree((2, 2))) is None
    with pytest.raises(ValueError, match=r"parents\[1\]"):
        decoding.check_parents([-1, 1])
    with pytest.raises(ValueError, match="branching"):
        k_ary_tree((2, 0))


@pytest.mark.parametrize(("scheme", "n"), [("iid", 2), ("without_replacement", 3), ("spechub", 2)])
def test_children_follow_their_joint(scheme, n):
    q = np.array([0.1, 0.5, 0.15, 0.25])
    draws = sample_children(np.tile(q, (20000, 1)), n, scheme, rng=3)
    observed: dict[tuple[int, ...], int] = {}
    for row in draws:
        observed[tuple(row.tolist())] = observed.get(tuple(row.tolist()), 0) + 1
    tuples = [t for t in itertools.product(range(4), repeat=n)]
    expected = np.array([children_probability(q, t, scheme) for t in tuples])
    assert expected.sum() == pytest.approx(1.0)
    counts = np.array([observed.pop(t, 0) for t in tuples], dtype=float)
    assert not observed
    keep = expected > 0
    assert counts[~keep].sum() == 0
    p_value = stats.chisquare(counts[keep], expected[keep] * counts.sum()).pvalue
    assert p_value > 1e-3


def test_per_row_generators_and_top_k():
    rng = np.random.default_rng(0)
    q = rng.dirichlet(np.ones(50), size=6)
    batch = sample_children(q, 3, "iid", [np.random.default_rng(s) for s in range(6)])
    alone = sample_children(q[4:5], 3, "iid", [np.random.default_rng(4)])
    assert batch[4].tolist() == alone[0].tolist()
    drafted = sample_children(q, 4, "without_replacement", 1, top_k=5)
    for row, law in zip(drafted, q, strict=True):
        assert len(set(row.tolist())) == 4
        assert set(row.tolist()) <= set(np.argsort(-law)[:5].tolist())
    with pytest.raises(ValueError, match="rng"):
        sample_children(q, 2, "iid", [1, 2])
    with pytest.raises(ValueError, match="scheme"):
        sample_children(q, 2, "hub")
    with pytest.raises(ValueError, match="n"):
        sample_children(q, 3, "spechub")


def test_restrict_top_k_breaks_ties_towards_the_drafts():
    q = np.array([[0.4, 0.2, 0.2, 0.2]])
    np.testing.assert_allclose(restrict_top_k(q, 2), [[2 / 3, 1 / 3, 0.0, 0.0]])
    kept = restrict_top_k(q, 2, np.array([[3, -1]]))
    np.testing.assert_allclose(kept, [[2 / 3, 0.0, 0.0, 1 / 3]])
    assert restrict_top_k(q, None) is q


def test_row_uniforms_follow_the_documented_streams():
    """Which uniforms a row gets is part of the reproducibility contract (row_uniforms): one
    generator or seed for the batch: its draws in row order; one per row (a sequence): row b's
    own first draws; a mapping {row: generator}: those rows' own draws, the others fresh; a
    torch.Generator: torch.rand on it, float64."""
    import torch

    from otlp.verification.drafting import row_uniforms

    rows, count = 3, 4
    shared = np.random.default_rng(7).random(rows * count).reshape(rows, count)
    np.testing.assert_array_equal(row_uniforms(7, rows, count), shared)
    np.testing.assert_array_equal(row_uniforms(np.random.default_rng(7), rows, count), shared)
    own = np.array([np.random.default_rng(s).random(count) for s in (5, 6, 9)])
    np.testing.assert_array_equal(row_uniforms([5, 6, 9], rows, count), own)
    np.testing.assert_array_equal(row_uniforms(np.array([5, 6, 9]), rows, count), own)
    generators = [np.random.default_rng(s) for s in (5, 6, 9)]
    np.testing.assert_array_equal(row_uniforms(generators, rows, count), own)
    mapped = row_uniforms({2: 9, 0: np.random.default_rng(5)}, rows, count)
    np.testing.assert_array_equal(mapped[[0, 2]], own[[0, 2]])
    assert mapped.shape == (rows, count) and ((mapped >= 0) & (mapped < 1)).all()
    assert not np.array_equal(mapped[1], row_uniforms({2: 9, 0: 5}, rows, count)[1])
    expected = torch.rand(
        rows * count, generator=torch.Generator().manual_seed(3), dtype=torch.float64
    )
    drawn = row_uniforms(torch.Generator().manual_seed(3), rows, count)
    assert drawn.dtype == np.float64
    np.testing.assert_array_equal(drawn, expected.numpy().reshape(rows, count))
    per_row = row_uniforms([torch.Generator().manual_seed(s) for s in (1, 2, 3)], rows, count)
    for b, s in enumerate((1, 2, 3)):
        first = torch.rand(count, generator=torch.Generator().manual_seed(s), dtype=torch.float64)
        np.testing.assert_array_equal(per_row[b], first.numpy())
    for bad, match in (
        ([1, 2], r"rng: expected one generator or seed per row \(3\), got 2"),
        ({3: 1}, r"rng: keys must be row indices in \[0, 3\), got 3"),
        ({"a": 1}, r"rng: keys must be row indices"),
        ([1, -2, 3], r"rng\[1\]: a seed must be non-negative"),
        ({1: -2}, r"rng\[1\]: a seed must be non-negative"),
        ("seed", r"rng: expected an int seed"),
    ):
        with pytest.raises(ValueError, match=match):
            row_uniforms(bad, rows, count)


def test_row_generators_follow_the_documented_streams():
    """sample_children's generators: one shared generator from a seed, None or a Generator;
    one per row from a sequence (row b's drafts from its own)."""
    from otlp.verification.drafting import row_generators

    shared = row_generators(4, 3)
    assert isinstance(shared, np.random.Generator)
    assert shared.random() == np.random.default_rng(4).random()
    given = np.random.default_rng(1)
    assert row_generators(given, 3) is given
    per_row = row_generators([4, np.random.default_rng(5), 6], 3)
    assert isinstance(per_row, list) and len(per_row) == 3
    for generator, seed in zip(per_row, (4, 5, 6), strict=True):
        assert generator.random() == np.random.default_rng(seed).random()
    with pytest.raises(ValueError, match=r"rng: expected one generator or seed per row \(3\)"):
        row_generators([1, 2], 3)
    with pytest.raises(ValueError, match=r"rng\[1\]"):
        row_generators([1, -1, 2], 3)


# ----- the drafting contract pinned by mutation testing (issue 27) ---------------------------
def test_a_law_over_one_token_is_valid_and_an_empty_one_is_refused():
    assert sample_children(np.ones((2, 1)), 1, rng=0).tolist() == [[0], [0]]
    with pytest.raises(ValueError, match=r"^q: expected at least one token per law"):
        sample_children(np.ones((2, 0)), 1, rng=0)


@pytest.mark.parametrize("bad", [-0.1, np.nan, np.inf])
def test_a_negative_or_non_finite_entry_is_refused_by_its_position(bad):
    q = np.full((2, 4), 0.25)
    q[1, 2] = bad
    with pytest.raises(ValueError, match=r"^q\[1, 2\]: expected a finite nonnegative"):
        sample_children(q, 1, rng=0)


def test_a_row_summing_to_zero_is_refused_by_its_index():
    q = np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match=r"^q\[1\]: sums to 0"):
        sample_children(q, 1, rng=0)


def test_spechub_drafts_at_most_two_children():
    q = np.full((1, 4), 0.25)
    assert sample_children(q, 2, "spechub", rng=0).shape == (1, 2)
    with pytest.raises(ValueError, match=r"^n: SpecHub's hub joint drafts two children, got n=3"):
        sample_children(q, 3, "spechub", rng=0)


def test_without_replacement_needs_n_tokens_and_takes_exactly_n():
    """n distinct drafts from a q with exactly n positive tokens are those n tokens; one
    token fewer is refused."""
    q = np.array([[0.5, 0.0, 0.5, 0.0]])
    for seed in range(5):
        assert sorted(sample_children(q, 2, "without_replacement", rng=seed)[0]) == [0, 2]
    with pytest.raises(ValueError, match=r"^n: drawing 3 distinct drafts needs 3 tokens"):
        sample_children(q, 3, "without_replacement", rng=0)


def test_a_uniform_of_exactly_zero_never_drafts_a_token_of_probability_zero():
    """The inverse CDF searches to the right of equal values: u = 0 (probability 2^-53 per
    draw) lands on the first token of positive probability, not on a leading zero."""
    from otlp.verification.drafting import _inverse_cdf

    q = np.array([0.0, 0.0, 0.25, 0.0, 0.75])
    assert _inverse_cdf(q, np.array([0.0, 0.25, 0.999999])).tolist() == [2, 4, 4]


def test_keep_with_the_wrong_number_of_rows_is_refused_naming_both_shapes():
    with pytest.raises(
        ValueError, match=r"^keep: expected one row per row of q \(2\), got \(3, 1\)"
    ):
        restrict_top_k(np.full((2, 5), 0.2), 2, keep=np.zeros((3, 1), dtype=np.int64))


@pytest.mark.parametrize(("scheme", "n"), [("iid", 3), ("without_replacement", 3), ("spechub", 2)])
def test_children_follow_the_documented_seeded_streams(scheme, n):
    """With one generator, i.i.d. children are the inverse CDF of n uniforms; the other
    schemes draw one tuple from their draft joint (one sample per node, in row order)."""
    rng = np.random.default_rng(11)
    q = rng.dirichlet(np.ones(9), size=2)
    got = sample_children(q, n, scheme, rng=np.random.default_rng(5))
    gen = np.random.default_rng(5)
    for m in range(2):
        if scheme == "iid":
            cdf = np.cumsum(q[m])
            want = np.searchsorted(cdf, gen.random(n) * cdf[-1], side="right")
        else:
            want = draft_joint(q[m] / q[m].sum(), n, scheme).sample(gen, 1)[0]
        assert got[m].tolist() == want.tolist()


def test_children_probability_is_the_scheme_tuple_mass_and_refuses_a_bad_scheme():
    q = np.array([0.1, 0.2, 0.3, 0.4])
    assert children_probability(q, [1, 2]) == pytest.approx(0.2 * 0.3)  # default: i.i.d.
    for scheme in ("iid", "without_replacement", "spechub"):
        assert children_probability(q, [2], scheme) == pytest.approx(0.3)  # one child: q
    with pytest.raises(ValueError, match=r"^scheme: expected one of iid, without_replacement"):
        children_probability(q, [1], "nosuch")  # was accepted for one child


def test_node_checks_name_omega_and_the_laws():
    q = np.full(4, 0.25)
    with pytest.raises(ValueError, match=r"^omega: expected a vector"):
        children_probability(q, [[0, 1]])
    with pytest.raises(ValueError, match=r"^omega\[0\]: token id 7 outside \[0, 4\)"):
        children_probability(q, [7])
    with pytest.raises(ValueError, match=r"^q: shape \(3,\) differs from p's \(4,\)"):
        check_node([0], p=np.full(4, 0.25), q=np.full(3, 1 / 3))
    with pytest.raises(ValueError, match=r"^q: expected a 2-D array"):
        sample_children(q, 1)
    with pytest.raises(ValueError, match=r"^keep: expected a 2-D array"):
        restrict_top_k(np.full((2, 4), 0.25), 2, keep=[1, 2])


def test_node_laws_must_be_vectors():
    """A node's laws are vectors: a 2-D or 0-d law is refused by name before any rule runs
    (the check of each law's dimension in ``check_node``)."""
    square = np.full((2, 4), 0.25)
    with pytest.raises(ValueError, match=r"^p: expected a vector, got shape \(2, 4\)"):
        check_node([0], p=square, q=square)
    with pytest.raises(ValueError, match=r"^q: expected a vector, got shape \(2, 4\)"):
        children_probability(square, [0])
    with pytest.raises(ValueError, match=r"^p: expected a vector, got shape \(\)"):
        node_law(0.5, np.full(4, 0.25), [0], method="sps")
    with pytest.raises(ValueError, match=r"^q: expected a vector, got shape \(1, 4\)"):
        node_law(np.full(4, 0.25), np.full((1, 4), 0.25), [0], method="sps")


def test_sampled_children_are_int64_token_ids():
    out = sample_children(np.full((3, 5), 0.2), 2, rng=0)
    assert out.dtype == np.int64 and out.shape == (3, 2)


def test_ties_fill_every_free_slot_drafts_first_then_by_token_id():
    """Two slots at a three-way tie at the k-th value: the drafted token, then the lowest
    other id; a row summing to zero stays zero."""
    q = np.array([[0.4, 0.2, 0.2, 0.2]])
    out = restrict_top_k(q, 3, keep=np.array([[3]]))
    assert np.flatnonzero(out[0]).tolist() == [0, 1, 3]
    assert out[0].sum() == pytest.approx(1.0)
    assert restrict_top_k(np.zeros((1, 4)), 2).tolist() == [[0.0] * 4]
