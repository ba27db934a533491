"""Printing a plan, a suite or a benchmark outcome shows what it is, not its arrays."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import otlp
from otlp.bench.runner import BenchOutcome
from otlp.instances import load, zipf_llm_pair
from otlp.reprs import summarize

SHORT = 300


def _instance() -> otlp.Instance:
    p, q = zipf_llm_pair(20_000, temperature=1.0, similarity=0.7, seed=0)
    return otlp.Instance(p, q, n=2, top_k=20)


def test_plan_repr_has_sizes_method_acceptance_and_status() -> None:
    plan = otlp.solve(_instance(), "maxflow")
    text = repr(plan)
    assert len(text) < SHORT
    for part in ("method='maxflow'", "V=20000", "n=2", "k=20", "status='verified'"):
        assert part in text
    assert f"acceptance={plan.acceptance:.6g}" in text


def test_lazy_plan_repr_does_not_solve_it() -> None:
    plan = otlp.solve(_instance(), "global_resolution", check=False)
    text = repr(plan)
    assert "status='unchecked'" in text and "tau=0.001" in text
    assert "explicit" not in plan.__dict__  # printing did not materialise the plan


def test_suite_and_outcome_reprs_are_short() -> None:
    suite = load("smollm2")
    assert len(repr(suite)) < SHORT and f"items=tuple(len={len(suite)})" in repr(suite)
    assert len(repr(suite.items[0])) < SHORT
    outcome = BenchOutcome(
        Path("out"), (Path("out/a.csv"),) * 9, 3, 4, 0, 1.5, (), ({"x": 1.0},) * 500
    )
    assert len(repr(outcome)) < SHORT and "summaries=tuple(len=500)" in repr(outcome)


def test_summarize() -> None:
    assert summarize(np.zeros((3, 4))) == "array(float64, shape=(3, 4))"
    assert summarize(0.123456789) == "0.123457"
    assert summarize([1, 2]) == "[1, 2]" and summarize(list(range(9))) == "list(len=9)"
    assert summarize("x" * 200).endswith("…'") and len(summarize("x" * 200)) < 70
