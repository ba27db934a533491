"""Shared argument checks: every rejection is a ValueError naming the argument."""

import numpy as np
import pytest

from otlp.args import as_generator, canonical_name, check_options, real_number


@pytest.mark.parametrize("bad", [None, "1", float("nan"), float("inf"), 1j, True])
def test_real_number_rejects(bad: object) -> None:
    with pytest.raises(ValueError, match="tau"):
        real_number("tau", bad)


def test_real_number_range() -> None:
    assert real_number("tau", 1e-3, minimum=0, exclusive_minimum=True) == 1e-3
    with pytest.raises(ValueError, match="greater than 0"):
        real_number("tau", 0.0, minimum=0, exclusive_minimum=True)
    with pytest.raises(ValueError, match="at most 1"):
        real_number("x", 2, maximum=1)


def test_as_generator_forms() -> None:
    gen = np.random.default_rng(1)
    assert as_generator(gen) is gen
    assert as_generator(5).random() == np.random.default_rng(5).random()
    assert isinstance(as_generator(None), np.random.Generator)
    for bad in ("x", 1.5, -1, True):
        with pytest.raises(ValueError, match="rng"):
            as_generator(bad)


def test_canonical_name_and_options() -> None:
    assert canonical_name("MaxFlow-CS") == "maxflow_cs"
    with pytest.raises(ValueError, match="method"):
        canonical_name(3, "method")
    check_options("highs", {"time_limit": 1}, ["time_limit"])
    with pytest.raises(ValueError, match="valid: presolve, time_limit"):
        check_options("highs", {"tme_limit": 3}, ["time_limit", "presolve"])
