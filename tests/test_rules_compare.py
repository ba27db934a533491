"""``otlp compare``: the table, the CSV, the plot, and failures that fail the run."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

import otlp
from otlp.cli import main
from otlp.rules import names
from otlp.rules.comparison import Case, evaluate
from otlp.rules.single import SpeculativeSampling


def test_compare_one_instance_writes_csv_and_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    table, figure = tmp_path / "out" / "c.csv", tmp_path / "c.png"
    argv = ["compare", "--vocab", "200", "--ns", "2,3", "--top-k", "5"]
    assert main([*argv, "--csv", str(table), "--plot", str(figure), "--mkdir"]) == 0
    out = capsys.readouterr().out
    assert "mean exact acceptance" in out and "FAILED" not in out
    rows = list(csv.DictReader(table.open()))
    assert len(rows) == 2 * len(names())
    for row in rows:
        if row["note"]:
            assert row["rule"] == "spechub" and row["n"] == "3"
            continue
        if row["lossless"] == "True":
            assert float(row["output_l1"]) <= 1e-9
            assert float(row["acceptance"]) <= float(row["alpha_star_own"]) + 1e-9
    ot = [float(r["acceptance"]) - float(r["alpha_star"]) for r in rows if r["rule"] == "ot"]
    assert np.abs(ot).max() <= 1e-9
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_suite_markdown(capsys: pytest.CaptureFixture) -> None:
    argv = ["compare", "--suite", "spechub-toy", "--ns", "2", "--top-k", "5"]
    assert main([*argv, "--rules", "sps,rrs,ot,spechub", "--markdown"]) == 0
    acceptance, checks = capsys.readouterr().out.strip().split("\n\n")
    lines = acceptance.splitlines()
    assert lines[0] == "|  | spechub-toy n=2 |"
    labels = [line.split("|")[1].strip() for line in lines[2:]]
    assert labels[-4:] == ["sps", "rrs", "ot", "spechub"]
    assert "alpha*, SpecHub hub joint" in labels
    assert checks.splitlines()[0].startswith("| rule | lossless | max L1(output, p)")
    assert len(checks.splitlines()) == 2 + 4


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["compare", "--rules", "sps,bogus"], "--rules: unknown bogus"),
        (["compare", "--ns", ","], "--ns: empty list"),
        (["compare", "--suite", "nope"], "suite: unknown 'nope'"),
    ],
)
def test_compare_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


class _Leaky(SpeculativeSampling):
    """A deliberately wrong rule: its output law is not p."""

    name = "leaky"

    def output_distribution(self, inst: otlp.Instance) -> np.ndarray:
        return np.roll(super().output_distribution(inst), 1)


def test_a_lossless_rule_off_p_is_reported_as_failed() -> None:
    inst = otlp.Instance([0.5, 0.3, 0.2], [0.2, 0.3, 0.5], 2)
    good, bad = evaluate(Case("t", "x", inst), [SpeculativeSampling(), _Leaky()])
    assert not good.failed and bad.failed
