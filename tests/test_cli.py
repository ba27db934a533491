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


# ----- conventions -----------------------------------------------------------------------------
def test_version_and_python_dash_m(capsys: pytest.CaptureFixture) -> None:
    import subprocess
    import sys

    import otlp

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"otlp {otlp.__version__}"
    done = subprocess.run(
        [sys.executable, "-m", "otlp", "--version"], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == f"otlp {otlp.__version__}"


def test_every_subcommand_has_json_help_and_an_example() -> None:
    from otlp.cli import build_parser

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert list(commands)[:2] == ["solve", "compare"]
    for name, sub in commands.items():
        text = sub.format_help()
        assert "--json" in text and "example:" in text and f"otlp {name}" in text, name
        assert sub.description, name


def test_old_names_are_aliases_and_lists_take_both_syntaxes(capsys: pytest.CaptureFixture) -> None:
    argv = ["solve", "--vocab", "50", "--top-k", "4", "--scheme", "without-replacement", "--json"]
    assert main([*argv, "--methods", "maxflow-cs,highs-full", "--methods", "maxflow"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [r["method"] for r in result["results"]] == ["maxflow_cs", "highs_full", "maxflow"]
    assert result["instance"]["scheme"] == "without_replacement"


def test_solve_skips_a_method_that_cannot_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from otlp import methods
    from otlp.errors import ProblemTooLarge

    def too_big(inst: object, form: str = "sets", **options: object) -> None:
        raise ProblemTooLarge("test problem", 10**12, 8 * 10**12, 10**6)

    monkeypatch.setitem(methods._METHODS, "too_big", (too_big, "always over its cap"))
    assert main(["solve", "--vocab", "50", "--top-k", "4", "--methods", "too_big,maxflow"]) == 0
    captured = capsys.readouterr()
    assert "time [ms]" in captured.out and "maxflow" in captured.out
    assert "too_big skipped" in captured.err


# ----- bad input: one line, exit 2, never a traceback ------------------------------------------
def _bad_files(tmp: Path) -> dict[str, Path]:
    files = {}
    good = tmp / "good.npz"
    np.savez(good, p=[0.5, 0.5], q=[0.5, 0.5])
    files["truncated npz"] = tmp / "truncated.npz"
    files["truncated npz"].write_bytes(good.read_bytes()[:40])
    files["empty npz"] = tmp / "empty.npz"
    files["empty npz"].write_bytes(b"")
    files["npz n=[2,3]"] = tmp / "n_list.npz"
    np.savez(files["npz n=[2,3]"], p=[0.5, 0.5], q=[0.5, 0.5], n=[2, 3])
    for label, text in {
        "json number": "3",
        "json string": '"x"',
        "json null": "null",
        "n null": '{"p": [0.5, 0.5], "q": [0.5, 0.5], "n": null}',
        "n 2.7": '{"p": [0.5, 0.5], "q": [0.5, 0.5], "n": 2.7}',
    }.items():
        files[label] = tmp / f"{label.replace(' ', '_')}.json"
        files[label].write_text(text)
    files["directory"] = tmp / "folder.json"
    files["directory"].mkdir()
    return files


def test_bad_instance_files_exit_2_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    for label, path in _bad_files(tmp_path).items():
        assert main(["solve", "--instance", str(path)]) == 2, label
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--instance" in err and "Traceback" not in err, label


def test_bad_output_paths_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    base = ["compare", "--vocab", "30", "--top-k", "3", "--rules", "sps"]
    assert main([*base, "--csv", str(tmp_path)]) == 2
    assert "--csv" in capsys.readouterr().err
    missing = tmp_path / "a" / "b" / "c.csv"
    assert main([*base, "--csv", str(missing)]) == 2
    assert "--mkdir" in capsys.readouterr().err and not missing.parent.exists()
    existing = tmp_path / "file"
    existing.write_text("x")
    assert main(["bench", "--out", str(existing)]) == 2
    assert "--out" in capsys.readouterr().err


def test_bad_scheduler_fails_fast_naming_the_flag(
    capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A malformed address is refused before any connection is tried (no client is made, so
    no connection timeout is waited for), whatever the machine's speed."""
    distributed = pytest.importorskip("distributed")
    clients: list[object] = []
    monkeypatch.setattr(distributed, "Client", lambda *a, **k: clients.append(a))
    assert main(["bench", "--scheduler", "nonsense", "--no-progress"]) == 2
    assert "--scheduler" in capsys.readouterr().err and not clients


def test_config_naming_an_unknown_method_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[[sweep]]\nmethods = ["maxflow", "nope"]\nkn = [[4, 2]]\n')
    assert main(["bench", "--config", str(config), "--out", str(tmp_path / "o")]) == 2
    assert "unknown nope" in capsys.readouterr().err


def test_config_options_a_method_rejects_exit_2_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from otlp import methods
    from otlp.args import check_options

    def picky(inst: object, form: str = "sets", **options: object) -> object:
        check_options("picky", options, ["good"])
        return methods.solve_maxflow(inst, form)

    monkeypatch.setitem(methods._METHODS, "picky", (picky, "takes only option good"))
    config = tmp_path / "c.toml"
    config.write_text(
        '[[sweep]]\nmethods = ["picky"]\nkn = [[4, 2]]\n[methods.picky]\noptions = {bad = 1}\n'
    )
    assert main(["bench", "--config", str(config), "--out", str(tmp_path / "o")]) == 2
    assert "[methods.picky] options: picky: unknown option(s) bad; valid: good" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "o" / "results.jsonl").exists()
