"""The ``otlp`` command line: instances from files or generators, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from otlp.cli import main


def test_solve_from_generator_prints_a_verified_table(capsys: pytest.CaptureFixture) -> None:
    assert main(["solve", "--vocab", "300", "--n", "2", "--top-k", "8"]) == 0
    out = capsys.readouterr().out
    assert "alpha* =" in out and "FAILED" not in out and "maxflow_cs" in out


@pytest.mark.parametrize("suffix", [".npz", ".json"])
def test_solve_from_file(tmp_path: Path, suffix: str, capsys: pytest.CaptureFixture) -> None:
    p, q = [0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]
    path = tmp_path / f"inst{suffix}"
    if suffix == ".npz":
        np.savez(path, p=p, q=q, n=3, scheme="iid")
    else:
        path.write_text(json.dumps({"p": p, "q": q, "n": 3, "top_k": 4}))
    code = main(["solve", "--instance", str(path), "--methods", "maxflow,pot", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0
    assert result["instance"]["n"] == 3
    alphas = {r["method"]: r["acceptance"] for r in result["results"]}
    assert alphas["maxflow"] == pytest.approx(result["alpha_star"])
    assert alphas["pot"] == pytest.approx(result["alpha_star"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["solve", "--n", "0"], "n: must be at least 1"),
        (["solve", "--methods", "nope"], "--methods: unknown nope"),
        (["solve", "--instance", "missing.npz"], "--instance: no such file"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture
) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_bad_json_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    assert main(["solve", "--instance", str(path)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
