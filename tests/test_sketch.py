"""otlp.sketch: API, seeding and exactness in the limits (the statistics are in otlp validate)."""

from __future__ import annotations

import numpy as np
import pytest

from otlp import sketch


@pytest.mark.parametrize("method", list(sketch.METHODS))
def test_seeded_estimates_reproduce(method: str) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(30), rng.standard_normal(30)
    first = sketch.estimate_inner_products(method, a, b, 8, 5, copies=3)
    again = sketch.estimate_inner_products(method, a, b, 8, np.random.default_rng(5), copies=3)
    assert first.shape == (3,) and np.array_equal(first, again)


def test_sampling_sketches_are_exact_when_m_covers_the_support() -> None:
    a = np.array([3.0, 0.0, -1.0, 2.0, 0.5])
    b = np.array([1.0, 4.0, 2.0, 0.0, -2.0])
    for sk in (sketch.ThresholdSampling(1000, 5, rng=1), sketch.PrioritySampling(10, 5, rng=1)):
        assert sk.estimate(sk.sketch(a), sk.sketch(b)) == pytest.approx(a @ b)


def test_single_copy_gives_a_float_and_qjl_constants_differ_by_sqrt_2() -> None:
    a = np.arange(1.0, 9.0)
    fixed, printed = (sketch.QJL(16, 8, rng=3, constant=c) for c in ("corrected", "printed"))
    est = fixed.estimate(fixed.sketch(a), fixed.sketch_query(a))
    assert isinstance(est, float)
    ratio = printed.estimate(printed.sketch(a), printed.sketch_query(a)) / est
    assert ratio == pytest.approx(np.sqrt(2))


def test_priority_sketch_has_exactly_m_entries() -> None:
    sk = sketch.PrioritySampling(4, 20, rng=0, copies=50)
    assert np.all(sk.sketch(np.random.default_rng(1).standard_normal(20)).size == 4)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: sketch.JL(0, 5), "m"),
        (lambda: sketch.JL(2, 5, kind="cauchy"), "kind"),
        (lambda: sketch.QJL(2, 5, constant="pi"), "constant"),
        (lambda: sketch.CountSketch(2, 5).sketch(np.ones(4)), "a"),
        (lambda: sketch.estimate_inner_products("simhash", [1.0], [1.0], 1), "method"),
        (lambda: sketch.JL(2, 5, rng="seed"), "rng"),
    ],
)
def test_bad_arguments_name_themselves(call, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        call()
