"""``otlp decode`` on the toy model pair: text and statistics, --compare, the --config grid,
and one-line errors (exit 2) for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from otlp.cli import main


def test_decode_prints_tokens_and_statistics(capsys: pytest.CaptureFixture) -> None:
    argv = ["decode", "--model", "toy", "--method", "rrs", "--paths", "2", "--depth", "2"]
    assert main([*argv, "--prompt", "1,2", "--max-new-tokens", "12", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "prompt 1" in out and "rrs" in out and "speculative decoding" in out


def test_compare_runs_methods_on_the_same_prompts(capsys: pytest.CaptureFixture) -> None:
    argv = ["decode", "--model", "toy", "--compare", "sps,gbv", "--paths", "1", "--depth", "3"]
    assert main([*argv, "--max-new-tokens", "30", "--json", "--no-progress"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {row["method"]: row for row in data["rows"]}
    assert set(rows) == {"ar", "sps", "gbv"}
    assert rows["ar"]["block_efficiency"] == 1.0
    assert rows["sps"]["block_efficiency"] > 1.0
    assert rows["sps"]["tokens"] == rows["gbv"]["tokens"] == 4 * 30


def test_config_grid_writes_table_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    config = tmp_path / "toy.toml"
    config.write_text(
        '[decode]\nmodel = "toy"\nmethods = ["block", "gbv", "rrs"]\npaths = [1, 2]\n'
        'depths = [1, 2]\ntemperatures = [1.0]\nmax_new_tokens = 8\nprompts = ["0", "1"]\n'
    )
    out = tmp_path / "out"
    assert main(["decode", "--config", str(config), "--out", str(out), "--no-progress"]) == 0
    table = (out / "decode.md").read_text()
    rows = json.loads((out / "decode.json").read_text())
    shapes = {(r["method"], r["shape"]) for r in rows}
    assert ("gbv", "2x2") in shapes and ("block", "1x2") in shapes and ("ar", "-") in shapes
    assert ("gbv", "1x1") not in shapes  # GBV with one path is block verification
    assert "break-even draft cost" in table
    assert sorted(p.name for p in out.glob("*.png")) == [
        "block_efficiency-T1-vs-K.png",
        "block_efficiency-T1-vs-L.png",
    ]
    capsys.readouterr()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--method", "nope"], "--method"),
        (["--paths", "0"], "--paths"),
        (["--prompt", "a,b"], "--prompt"),
        (["--prompt", "99"], "--prompt"),
        (["--method", "spechub", "--paths", "4"], "spechub"),
        (["--method", "block", "--paths", "2"], "block"),
        (["--out", "x"], "--out"),
        (["--config", "missing.toml"], "--config"),
        (["--temperature", "-1"], "temperature"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture
) -> None:
    assert main(["decode", "--model", "toy", "--no-progress", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err and "Traceback" not in err
