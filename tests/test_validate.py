"""The otlp.validate runner and the `otlp validate` command."""

from __future__ import annotations

import json

import pytest

import otlp.validate
from otlp.cli import main
from otlp.validate.registry import _CHECKS, Outcome, check


@pytest.fixture
def fake_checks():
    """Two throw-away checks: a false statement, and a 'printed error' that always holds."""

    @check("test.false", "GR", "-", "x < 0.5 for x ~ U(0, 1)")
    def _false(case):
        x = float(case.rng.random())
        case.record(x=x)
        return Outcome(0.5 - x, {"x": x})

    @check("test.unrefuted", "GR", "-", "always true", expect_fail=True)
    def _true(case):
        return Outcome(1.0)

    yield
    del _CHECKS["test.false"], _CHECKS["test.unrefuted"]


def test_report_counts_margins_and_saves_the_worst_instance(fake_checks) -> None:
    report = otlp.validate.run(["test.false"], count=50, seed=3)
    (r,) = report.results
    assert r.tried == 50 and 0 < r.passed < 50 and r.status == "VIOLATED" and not report.ok
    assert r.worst_margin == pytest.approx(0.5 - r.worst_instance["x"])
    again = otlp.validate.replay("test.false", seed=3, index=r.worst_index)
    assert again.margin == r.worst_margin


def test_printed_statement_that_holds_is_flagged(fake_checks) -> None:
    (r,) = otlp.validate.run(["test.unrefuted"], count=5).results
    assert r.status == "NOT REFUTED" and not r.ok


def test_runs_are_reproducible_and_seeds_matter() -> None:
    a = otlp.validate.run(["gr.lemma6_3"], count=5, seed=7).results[0]
    b = otlp.validate.run(["gr.lemma6_3"], count=5, seed=7).results[0]
    c = otlp.validate.run(["gr.lemma6_3"], count=5, seed=8).results[0]
    assert a.worst_instance == b.worst_instance != c.worst_instance


def test_suite_items_stand_in_for_random_pairs() -> None:
    report = otlp.validate.run(["spechub.thm1.lp_equivalence"], count=3, suite="spechub-toy")
    assert report.ok and report.results[0].worst_instance["suite_item"].startswith("toy-")


def test_bad_arguments_name_themselves() -> None:
    with pytest.raises(ValueError, match="checks"):
        otlp.validate.run(["no.such.check"])
    with pytest.raises(ValueError, match="count"):
        otlp.validate.run(["gr.lemma6_3"], count=0)


def test_cli_quick_run_writes_reports_and_exits_zero(tmp_path, capsys) -> None:
    """`otlp validate --quick` over every check (the CI-sized run)."""
    assert main(["validate", "--quick", "--out", str(tmp_path), "--no-plot"]) == 0
    data = json.loads((tmp_path / "validate.json").read_text())
    assert data["ok"] and data["statements"] >= 40
    assert "| check |" in (tmp_path / "validate.md").read_text()


def test_cli_exits_non_zero_on_a_failed_check(fake_checks, tmp_path) -> None:
    assert (
        main(
            [
                "validate",
                "--checks",
                "test.false",
                "--count",
                "20",
                "--out",
                str(tmp_path),
                "--no-plot",
            ]
        )
        == 1
    )
