"""Python API errors: a ValueError naming the argument, never a TypeError/AttributeError from
deep inside; rng accepts an int, None or a Generator everywhere."""

from __future__ import annotations

import numpy as np
import pytest

import otlp
import otlp.rules

INST = otlp.Instance([0.5, 0.3, 0.2], [0.2, 0.3, 0.5], 2)
PLAN = otlp.solve(INST, "maxflow")


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: otlp.optimal_acceptance((0.5, 0.5)), "inst"),
        (lambda: otlp.solve((0.5, 0.5)), "inst"),
        (lambda: otlp.verify("x"), "plan"),
        (lambda: otlp.verify(PLAN, tolerances=1e-3), "tolerances"),
        (lambda: otlp.rules.get("rrs").acceptance((0.5, 0.5)), "inst"),
        (lambda: otlp.rules.get("gumbel").output_distribution((0.5,)), "inst"),
        (lambda: PLAN.sample([0, 1], 0, size=0), "size"),
        (lambda: PLAN.sample([0, 1], "seed"), "rng"),
        (lambda: INST.sample_drafts(0, 0), "size"),
        (lambda: PLAN.slice([[0, 1]]), "omega"),
        (lambda: otlp.Instance([0.5 + 0j, 0.5], [0.5, 0.5], 2), "p"),
        (lambda: otlp.Instance([0.5, 0.5], [0.5, 0.5], 2, atol=float("nan")), "atol"),
        (lambda: otlp.Instance([0.5, 0.5], [0.3, 0.3, 0.397], 2), "q: length 3"),
        (lambda: otlp.solve(INST, "highs", tme_limit=3), "tme_limit.*valid: method"),
        (lambda: otlp.solve(INST, "maxflow", foo=1), "foo.*valid: scale_bits"),
        (lambda: otlp.solve(INST, "pot", foo=1), "valid: max_iterations"),
        (lambda: otlp.solve(INST, "highs", time_limit=-1), "time_limit"),
        (lambda: otlp.limits.configure(max_variables=-1), "max_variables"),
        (lambda: otlp.Tolerances(target_l1=float("nan")), "target_l1"),
    ],
)
def test_bad_arguments_get_a_value_error_naming_them(call, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        call()


@pytest.mark.parametrize("rng", [0, None, np.random.default_rng(0)])
def test_rng_accepts_int_none_and_generator(rng: object) -> None:
    assert INST.sample_drafts(rng, 2).shape == (2, 2)
    assert PLAN.sample([int(INST.tokens[0])] * 2, rng) in (0, 1, 2)
    tokens, _ = otlp.rules.get("rrs").sample(INST, rng, 3)
    assert tokens.shape == (3,)


def test_seeded_sampling_is_reproducible() -> None:
    omega = [int(INST.tokens[0]), int(INST.tokens[1])]
    assert (PLAN.sample(omega, 7, size=20) == PLAN.sample(omega, 7, size=20)).all()
