"""Hypothesis strategies for small, often degenerate, instances."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import otlp


@st.composite
def weight_vectors(draw: st.DrawFn, size: int) -> np.ndarray:
    """Small integer weights (zeros and ties are common), sometimes one-hot or with a tiny
    entry (1e-12, 1e-300 or subnormal 1e-310)."""
    weights = np.array(draw(st.lists(st.integers(0, 4), min_size=size, max_size=size)), float)
    if weights.sum() == 0 or draw(st.integers(0, 9)) == 0:
        weights[:] = 0.0
        weights[draw(st.integers(0, size - 1))] = 1.0
    if draw(st.booleans()):
        tiny = draw(st.integers(0, size - 1))
        if weights[tiny] > 0 and np.count_nonzero(weights) > 1:
            weights[tiny] = draw(st.sampled_from([1e-12, 1e-300, 1e-310]))
    return weights / weights.sum()


@st.composite
def instances(
    draw: st.DrawFn,
    schemes: tuple[str, ...] = otlp.SCHEMES,
    max_vocab: int = 6,
    max_n: int = 3,
) -> otlp.Instance:
    """A random small instance of one of ``schemes``."""
    vocab = draw(st.integers(1, max_vocab))
    scheme = draw(st.sampled_from(schemes))
    n = draw(st.integers(1, max_n))
    p = draw(weight_vectors(vocab))
    if scheme == "independent":
        q = [draw(weight_vectors(vocab)) for _ in range(n)]
    else:
        q = draw(weight_vectors(vocab))
        if draw(st.integers(0, 5)) == 0:
            q = p.copy()  # p = q
    if scheme in ("without_replacement", "greedy"):
        support = int(np.count_nonzero(q))
        if support < n:
            n = support
    smallest = n if scheme in ("without_replacement", "greedy") else 1
    top_k = draw(st.one_of(st.none(), st.integers(smallest, vocab)))
    return otlp.Instance(p, q, n, scheme, top_k)


def model_pairs(
    max_vocab: int = 3,
    max_gamma: int = 3,
    sparsities: tuple[float, ...] = (0.0, 0.3, 0.6),
    distances: tuple[float, ...] = (0.0, 0.3, 0.9),
) -> st.SearchStrategy:
    """(target, draft, gamma): a random multi-step model pair of random kind; ``sparsity`` makes
    tokens the draft cannot produce, ``distance`` moves the draft away from the target."""
    from otlp.multistep import MODEL_KINDS, model_pair

    return st.builds(
        lambda kind, vocab, gamma, sparsity, distance, seed: (
            *model_pair(
                kind, vocab, seed=seed, distance=distance, sparsity=sparsity, depth=gamma + 1
            ),
            gamma,
        ),
        st.sampled_from(MODEL_KINDS),
        st.integers(2, max_vocab),
        st.integers(1, max_gamma),
        st.sampled_from(sparsities),
        st.sampled_from(distances),
        st.integers(0, 10_000),
    )
