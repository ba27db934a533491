"""The compiled node kernels (solvers.node_rules) against the float64 procedures they replace.

verify_tree runs sps, rrs, rrs without replacement and SpecHub's one-child nodes on the
caller's rows as given (float32 or float64, never copied); the same uniforms must give the
same token as the float64 procedure on the renormalised rows
(otlp.verification.tree._rejection_token, whose law tests/test_decoding_verify.py pins by
enumeration), and a bad row must be refused with check_distributions' message.
"""

from __future__ import annotations

import numpy as np
import pytest

from otlp.verification import tree as tree_module
from otlp.verification.laws import ContextLaws
from solvers.node_rules import draw_scaled, rejection_token, row_total


def _pair(rng: np.random.Generator, vocab: int, sparse: bool) -> tuple[np.ndarray, np.ndarray]:
    p = rng.dirichlet(np.full(vocab, 0.3))
    q = rng.dirichlet(np.full(vocab, 0.3))
    if sparse:  # tokens of zero target or draft mass, and a nearly one-hot draft
        p[rng.integers(vocab, size=vocab // 3)] = 0.0
        q[rng.integers(vocab, size=vocab // 3)] = 0.0
        q[int(np.argmax(q))] += 50.0
    return p / p.sum(), q / q.sum()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("scheme", ["iid", "without_replacement"])
def test_rejection_kernel_equals_the_float64_procedure(dtype, scheme):
    rng = np.random.default_rng(5)
    mismatches = 0
    trials = 0
    for trial in range(300):
        vocab = int(rng.integers(2, 12))
        p, q = _pair(rng, vocab, sparse=trial % 2 == 1)
        p_in, q_in = p.astype(dtype), q.astype(dtype)
        support = np.flatnonzero(q_in > 0)
        n = int(rng.integers(1, min(4, support.shape[0]) + 1))
        replace = scheme == "iid"
        omega = rng.choice(support, size=n, replace=replace).astype(np.int64)
        u = rng.random(n + 1)
        work = np.empty((2, vocab))
        removed = np.zeros(vocab, dtype=bool)
        p_total, _ = row_total(p_in)
        q_total, _ = row_total(q_in)
        got = rejection_token(
            p_in, q_in, p_total, q_total, omega, scheme != "iid", u, work, removed
        )
        p64 = p_in.astype(np.float64)
        q64 = q_in.astype(np.float64)
        want = tree_module._rejection_token(p64 / p64.sum(), q64 / q64.sum(), omega, scheme, u)
        assert not removed.any()
        trials += 1
        mismatches += got != want
    assert mismatches == 0, f"{mismatches} of {trials} tokens differ"


def test_draw_scaled_is_the_inverse_cdf_draw():
    rng = np.random.default_rng(1)
    for _ in range(200):
        law = rng.random(7) * (rng.random(7) < 0.6)
        if not law.any():
            continue
        u = float(rng.random())
        assert draw_scaled(law.astype(np.float32), float(law.astype(np.float32).sum()), u) == (
            tree_module.draw(law.astype(np.float32).astype(np.float64), u)
        )
    assert draw_scaled(np.array([0.0, 0.5, 0.5, 0.0]), 1.0, 1.0 - 1e-17) == 2  # never a zero


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (np.nan, r"p\[1, 2\]: has a negative, NaN or infinite entry"),
        (-0.25, r"p\[1, 2\]: has a negative, NaN or infinite entry"),
        (np.inf, r"p\[1, 2\]: has a negative, NaN or infinite entry"),
        (0.75, r"p\[1, 2\]: does not sum to 1 within atol 0.0001"),
    ],
)
def test_a_bad_row_is_refused_naming_it(bad, match):
    values = np.full((2, 3, 4), 0.25, dtype=np.float32)
    values[1, 2, 3] = bad
    laws = ContextLaws("p", values, (2, 3), None)
    assert laws.total(0, 0) == pytest.approx(1.0)
    with pytest.raises(ValueError, match=match):
        laws.total(1, 2)


def test_rows_are_read_as_given_not_copied():
    values = np.full((1, 2, 8), 1 / 8, dtype=np.float32)
    laws = ContextLaws("q", values, (1, 2), None)
    assert np.shares_memory(laws.native(0, 1), values)
    assert laws.row(0, 1).dtype == np.float64
