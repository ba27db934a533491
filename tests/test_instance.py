"""Input validation at the API boundary and the size limit checked before allocation."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import otlp
from otlp.instance import _top_tokens

P = [0.5, 0.3, 0.2]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"p": [0.5, np.nan, 0.5]}, "p: contains NaN"),
        ({"p": [0.5, np.inf, 0.5]}, "p: contains NaN or infinite"),
        ({"q": [0.5, 0.7, -0.2]}, "q: has negative"),
        ({"p": [0.5, 0.3, 0.3]}, "p: sums to"),
        ({"q": [0.5, 0.5]}, "q: length 2 differs"),
        ({"p": [[0.5, 0.5]]}, "p: expected a 1-D"),
        ({"p": []}, "p: empty"),
        ({"p": ["a", "b", "c"]}, "p: not a numeric"),
        ({"n": 0}, "n: must be at least 1"),
        ({"n": 2.5}, "n: expected an integer"),
        ({"top_k": 0}, "top_k: must be at least 1"),
        ({"top_k": 4}, "top_k: must be at most 3"),
        ({"scheme": "magic"}, "scheme: expected one of"),
        ({"scheme": "independent", "n": 2}, "q: scheme 'independent' needs n=2"),
        ({"scheme": "without_replacement", "n": 3, "q": [0.5, 0.5, 0.0]}, "n: sampling 3"),
    ],
)
def test_bad_input_names_the_argument(kwargs: dict, match: str) -> None:
    args = {"p": P, "q": P, "n": 2} | kwargs
    with pytest.raises(ValueError, match=match):
        otlp.Instance(**args)


def test_independent_draft_count_and_lengths_are_checked() -> None:
    with pytest.raises(ValueError, match=r"q\[1\]: length 2 differs"):
        otlp.Instance(P, [P, [0.5, 0.5]], 2, "independent")


def test_renormalize_on_request_only() -> None:
    inst = otlp.Instance([2.0, 1.0, 1.0], [1, 1, 2], 2, renormalize=True)
    assert inst.p.tolist() == [0.5, 0.25, 0.25]
    with pytest.raises(ValueError, match="p: sums to"):
        otlp.Instance([2.0, 1.0, 1.0], [1, 1, 2], 2)


def test_laws_within_atol_are_divided_to_a_unit_sum() -> None:
    """p and q accepted within atol of summing to 1 are divided by their own sums, so the
    transport problem is balanced: sums 1 - 4e-7 and 1 + 4e-7 come out at 1 to rounding."""
    p = np.array([0.5, 0.3, 0.2 - 4e-7])
    q = np.array([0.4, 0.4, 0.2 + 4e-7])
    inst = otlp.Instance(p, q, 2)
    assert abs(inst.p.sum() - 1) <= 1e-15 and abs(inst.q.sum() - 1) <= 1e-15
    np.testing.assert_allclose(inst.p, p / p.sum(), rtol=1e-15)


def test_inputs_are_not_modified_and_instances_are_read_only() -> None:
    p = np.array(P)
    inst = otlp.Instance(p, p, 2)
    assert p.flags.writeable
    with pytest.raises(ValueError):
        inst.p[0] = 1.0


def test_oversized_problems_are_refused_before_allocating() -> None:
    vocab = 50_000
    p = np.full(vocab, 1.0 / vocab)
    inst = otlp.Instance(p, p, 3)  # no top-k: k = 50,000
    tracemalloc.start()
    with pytest.raises(otlp.ProblemTooLarge, match=r"variables \(about .* GiB\)") as info:
        otlp.solve(inst, "maxflow")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert info.value.variables > 10**13
    assert peak < 50 * 2**20  # refused before the multi-terabyte allocation
    with otlp.limits.limited(max_variables=10), pytest.raises(otlp.ProblemTooLarge):
        otlp.solve(otlp.Instance(P, P, 3), "highs_full")


def test_large_vocabulary_with_top_k_scales_with_k() -> None:
    rng = np.random.default_rng(0)
    vocab = 60_000
    p, q = rng.dirichlet(np.ones(vocab) * 0.05), rng.dirichlet(np.ones(vocab) * 0.05)
    inst = otlp.Instance(p, q, 2, top_k=30)
    plan = otlp.solve(inst, "maxflow_cs", strict=True)
    assert inst.k == 30
    sliced = plan.slice(inst.sample_drafts(rng, 1)[0])
    assert sliced.shape == (vocab,)
    assert sliced.sum() == pytest.approx(1.0)


@given(
    row=st.lists(st.sampled_from([0.0, 1e-300, 0.1, 0.25, 0.5, 1.0, 3.0]), min_size=1, max_size=40),
    top_k=st.integers(1, 45),
)
def test_top_tokens_match_the_full_sort(row: list[float], top_k: int) -> None:
    """The O(V) selection keeps the list of a full sort (ties by token id), zeros excluded."""
    values = np.array(row)
    positive = np.flatnonzero(values > 0)
    reference = positive[np.lexsort((positive, -values[positive]))][:top_k]
    np.testing.assert_array_equal(_top_tokens(values, top_k), reference)
    full = positive[np.lexsort((positive, -values[positive]))]
    np.testing.assert_array_equal(_top_tokens(values, None), full)
