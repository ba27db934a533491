"""Radix sorting and selection of the per-token path against numpy's comparison sorts."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otlp.solvers.global_resolution import token
from otlp.solvers.global_resolution.sorting import largest, stable_argsort

SPECIAL = [0.0, -0.0, -np.inf, np.inf, 1.5, -2.0, 1e-310, -1e-310, 5e-324, 1.0]


@settings(deadline=None)
@given(st.lists(st.one_of(st.sampled_from(SPECIAL), st.floats(allow_nan=False)), max_size=60))
def test_stable_argsort_is_numpys_stable_sort(values: list[float]) -> None:
    keys = np.array(values, dtype=np.float64)
    np.testing.assert_array_equal(stable_argsort(keys), np.argsort(keys, kind="stable"))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("top_k", [1, 3, 40, 700, 3000])
def test_both_top_k_paths_match_the_full_sort(dtype: type, top_k: int) -> None:
    """V = 3,000 with many ties: k <= V / HEAP_SHARE takes the heap, larger k the selection;
    both keep the list of a full sort (decreasing q, ties by increasing id, zeros dropped)."""
    rng = np.random.default_rng(top_k)
    values = rng.choice([0.0, 1e-300, 3e-5, 0.1, 0.25], size=3000) * rng.integers(1, 4, 3000)
    values = values.astype(dtype)
    positive = np.flatnonzero(values > 0)
    expected = positive[np.lexsort((positive, -values[positive].astype(np.float64)))][:top_k]
    np.testing.assert_array_equal(token.top_tokens(values, top_k), expected)
    if top_k < values.size:
        np.testing.assert_array_equal(largest(values, top_k), expected)


def _full_sort_top(values: np.ndarray, top_k: int) -> np.ndarray:
    positive = np.flatnonzero(values > 0)
    return positive[np.lexsort((positive, -values[positive].astype(np.float64)))][:top_k]


@pytest.mark.parametrize(
    "order", ["increasing", "decreasing", "spikes on the sample", "ties at the threshold"]
)
def test_the_heap_threshold_keeps_the_top_k_whatever_the_order(order: str) -> None:
    """The heap skips entries below a threshold estimated from every 16th entry: q growing
    with the id (every entry would beat the heap's worst), q falling with it, a sample that
    sees only large entries (its threshold is reached by too few entries: every positive
    entry is a candidate again) and many entries tied at the threshold all keep the list of
    a full sort."""
    rng = np.random.default_rng(3)
    vocab, top_k = 32_000, 100
    values = np.sort(rng.random(vocab))
    if order == "decreasing":
        values = values[::-1].copy()
    elif order == "spikes on the sample":
        values = rng.random(vocab) * 1e-3
        values[::16] = 1.0 + rng.random(values[::16].shape[0])
        values[::16][300:] = 0.0  # 300 large entries seen by the sample, fewer than it expects
    elif order == "ties at the threshold":
        values = rng.choice([0.1, 0.2, 0.3], size=vocab)
    np.testing.assert_array_equal(token.top_tokens(values, top_k), _full_sort_top(values, top_k))
