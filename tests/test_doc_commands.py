"""Every shell command the README and the documentation tell a user to run, run by the suite
(issue 25): the fenced ``bash`` blocks and the inline `` `otlp ...` ``, `` `python -m ...` ``
and `` `python benchmarks/...` `` commands are extracted from the pages, so a command added or
changed on a page is checked without editing this file.

* Every ``otlp`` command is parsed by the real parser (``otlp.cli.build_parser``): an unknown
  flag, a value of the wrong type or an unknown choice fails here.
* Quick ones run in full (``solve``, ``suites``, ``decode --model toy``, ``validate --list``,
  ``--help``); long ones run at a reduced size where that is cheap (``fuzz`` with 5 cases on one
  worker, ``validate`` with one instance per statement, ``multistep`` at its first L and K);
  ``bench`` and ``decode`` configs are loaded and checked; the rest (SmolLM2 decoding, whole
  suites) are parsed only. Outputs go to a temporary folder, never to tracked results.
* ``python benchmarks/X.py ARGS`` runs the script with its argument parser stopped right after
  parsing ARGS; ``python -m pip install -c constraints.txt -e ".[extra]"`` names extras that
  exist and installs from the lock; ``python -m pytest PATH`` names test files that exist;
  ``python -c`` snippets run.

A command with a placeholder (``FILE``, ``DIR``, ``NAME``, ``COMMAND``, ``...``) is a pattern, not
a command, and is skipped.
"""

from __future__ import annotations

import argparse
import os
import re
import runpy
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from otlp.cli import build_parser, main

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# Every fenced block, paired opening to closing at line starts (a pattern for shell blocks alone
# would take the closing fence of a python or toml block for an unlabelled opening, and shift
# the pairing of every block after it).
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
SHELL = ("bash", "sh", "shell", "console", "")
INLINE = re.compile(r"`((?:python -m |python )?otlp [^`]+|python [^`]+)`")
PLACEHOLDER = re.compile(r"\b(FILE|DIR|NAME|COMMAND|PATH|LIST)\b|\.\.\.")
# Tools the pages mention that the suite exercises elsewhere (mkdocs: tests/test_docs.py, mypy:
# tests/test_typing.py) or that are outside the project (mutmut, venv).
EXTERNAL_TOOLS = {"mkdocs", "mypy", "mutmut", "venv"}
OUTPUT_FLAGS = ("--out", "--csv", "--plot")
# Inputs a page names as refused (docs/testing.md lists what the CLI rejects; docs/guide/cli.md
# names the bare command): each must exit 2 with one line, like any bad input.
REFUSED = {"otlp fuzz --only", "otlp fuzz --replay", "otlp validate --count 0", "python -m otlp"}
_RAN: set[tuple[str, ...]] = set()  # reduced commands already run (pages repeat commands)


def _commands(text: str) -> list[str]:
    """Shell commands of a page: fenced lines (continuations joined, comments dropped, ``&&``
    split) and inline code spans that start like a command."""
    found = []
    for language, block in FENCE.findall(text):
        if language not in SHELL:
            continue
        lines = block.replace("\\\n", " ").splitlines()
        if not language:  # an unlabelled block: only its lines that start like a command
            lines = [line for line in lines if line.startswith(("otlp ", "python "))]
        for line in lines:
            found += [part.strip() for part in line.split("&&")]
    for span in INLINE.findall(text):
        if ": error:" not in span:  # an error message quoted on a page, not a command
            found.append(" ".join(span.split()))
    return [c for c in found if shlex.split(c, comments=True) and not PLACEHOLDER.search(c)]


def _documented() -> dict[str, str]:
    """Command -> the first page that shows it."""
    seen: dict[str, str] = {}
    for page in PAGES:
        for command in _commands(page.read_text()):
            seen.setdefault(command, str(page.relative_to(ROOT)))
    return seen


DOCUMENTED = _documented()


def _argv(command: str) -> list[str]:
    return shlex.split(command, comments=True)


def _otlp_argv(argv: list[str]) -> list[str] | None:
    if argv[:1] == ["otlp"]:
        return argv[1:]
    if argv[:3] == ["python", "-m", "otlp"]:
        return argv[3:]
    return None


def test_the_pages_hold_the_commands_users_are_told_to_run() -> None:
    otlp_commands = [c for c in DOCUMENTED if _otlp_argv(_argv(c)) is not None]
    assert len(otlp_commands) >= 30
    assert "otlp solve --generator zipf --vocab 1000 --n 3 --top-k 12" in DOCUMENTED
    assert any(c.startswith("python benchmarks/") for c in DOCUMENTED)
    assert not any("FILE" in c for c in DOCUMENTED)
    assert set(DOCUMENTED) >= REFUSED  # the refused inputs are still on their pages


# ----- otlp commands -------------------------------------------------------------------------
def _set(argv: list[str], flag: str, value: str) -> list[str]:
    """``argv`` with ``flag`` set to ``value`` (replaced if present, appended if not)."""
    out, skip = [], False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg == flag and i + 1 < len(argv):
            skip = True
            continue
        if arg.startswith(f"{flag}="):
            continue
        out.append(arg)
    return [*out, flag, value]


def _value(argv: list[str], flag: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(f"{flag}="):
            return arg.split("=", 1)[1]
    return None


def _first(value: str | None) -> str | None:
    return None if value is None else value.split(",")[0]


def _reduced(args: list[str], tmp: Path) -> list[str] | None:
    """The argv to run (quick in full, long at a reduced size), or None: parse only."""
    if not args or "--help" in args or "-h" in args or args == ["--version"]:
        return args
    command = args[0]
    for flag in OUTPUT_FLAGS:  # outputs to a temporary folder, never to tracked results
        value = _value(args, flag)
        if value is not None:
            args = _set(args, flag, str(tmp / Path(value).name))
    if command in ("solve", "suites"):
        return args
    if command == "decode":
        return [*args, "--no-progress"] if _value(args, "--model") == "toy" else None
    if command == "fuzz":
        if _value(args, "--replay") is not None:
            return None  # replays a file that a failing run writes
        cases = min(int(_value(args, "--cases") or 2), 2)
        reduced = _set(_set(args, "--cases", str(cases)), "--workers", "1")
        return _set([*reduced, "--no-progress"], "--out", str(tmp / "fuzz"))
    if command == "validate":
        if "--list" in args:
            return args
        reduced = _set(_set(args, "--count", "1"), "--out", str(tmp / "validate"))
        if "--quick" in reduced:
            reduced.remove("--quick")
        return [*reduced, "--no-plot", "--no-progress"]
    if command == "multistep":
        for flag in ("--block-lengths", "--paths"):
            first = _first(_value(args, flag))
            args = _set(args, flag, first or "1")
        return [*args, "--no-progress"]
    return None  # bench, compare over whole suites, SmolLM2 decoding: parsed and checked


def _check_configs(args: list[str]) -> None:
    """A bench or decode config named on a page exists and loads (its TOML is checked)."""
    config = _value(args, "--config")
    if config is None:
        return
    path = ROOT / config
    if args[0] == "bench":
        from otlp.bench import load_config
        from otlp.bench.verification import load_verification

        if load_verification(path) is None:  # the verification bench has its own table
            load_config(path)
    elif args[0] == "decode":
        from otlp.decoding.grid import read_grid

        read_grid(path)


OTLP = {c: page for c, page in DOCUMENTED.items() if _otlp_argv(_argv(c)) is not None}


@pytest.mark.parametrize("command", sorted(OTLP), ids=sorted(OTLP))
def test_documented_otlp_command(
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    args = _otlp_argv(_argv(command))
    assert args is not None
    where = f"{command!r} ({OTLP[command]})"
    if command in REFUSED:
        assert main(args) == 2, where
        assert len(capsys.readouterr().err.strip().splitlines()) == 1, where
        return
    if args and args != ["--version"] and "--help" not in args:
        try:
            build_parser().parse_args(args)
        except SystemExit as exc:
            pytest.fail(f"{where} does not parse: {capsys.readouterr().err.strip()} ({exc})")
        _check_configs(args)
    run = _reduced(args, tmp_path)
    key = tuple(arg.replace(str(tmp_path), "TMP") for arg in run or ())
    if run is None or key in _RAN:
        return
    monkeypatch.chdir(ROOT)
    code = main(run)
    captured = capsys.readouterr()
    assert code == 0, f"{where} ran as {run} and exited {code}: {captured.err.strip()[-500:]}"
    _RAN.add(key)


# ----- other commands ------------------------------------------------------------------------
class _Parsed(Exception):
    """Raised by the patched ``parse_args`` once a script's arguments parsed."""


def _parse_script(path: Path, argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Run ``path`` as ``__main__`` with ``argv`` until its parser has parsed them."""
    real = argparse.ArgumentParser.parse_args

    def parse_and_stop(self: argparse.ArgumentParser, *a: object, **k: object) -> object:
        real(self, *a, **k)  # type: ignore[arg-type]
        raise _Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_and_stop)
    monkeypatch.setattr(sys, "argv", [str(path), *argv])
    monkeypatch.chdir(ROOT)
    environment = dict(os.environ)
    try:
        with pytest.raises(_Parsed):
            runpy.run_path(str(path), run_name="__main__")
    finally:
        # Scripts pin thread counts at import (e.g. NUMBA_NUM_THREADS=1): left in this process,
        # numba refuses every later compile once its threads have launched with another count.
        os.environ.clear()
        os.environ.update(environment)


def _extras() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return set(project["optional-dependencies"])


OTHER = {c: page for c, page in DOCUMENTED.items() if c not in OTLP}


@pytest.mark.parametrize("command", sorted(OTHER), ids=sorted(OTHER))
def test_documented_python_command(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    argv = _argv(command)
    where = f"{command!r} ({OTHER[command]})"
    if argv[0].startswith(".ci/"):  # a maintenance script (it rebuilds environments): it exists
        script = ROOT / argv[0]
        assert script.is_file() and os.access(script, os.X_OK) and argv[1:] == [], where
        return
    assert argv[0] == "python", where
    if argv[1].endswith(".py"):  # a script of the repository
        path = ROOT / argv[1]
        assert path.is_file(), f"{where}: no {argv[1]}"
        if "parse_args(" in path.read_text():
            _parse_script(path, argv[2:], monkeypatch)
        # else: a script that reads sys.argv itself cannot be checked without running it
        return
    assert argv[1] in ("-m", "-c"), where
    if argv[1] == "-c":
        argv = [sys.executable, *argv[1:]]  # this environment's Python, activated or not
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
        assert done.returncode == 0, f"{where}: {done.stderr[-500:]}"
        return
    module, rest = argv[2], argv[3:]
    if module == "pip":
        extras = re.findall(r"\.\[([\w,-]+)\]", command)
        assert extras and set(",".join(extras).split(",")) <= _extras(), where
        assert "-c constraints.txt" in command, f"{where}: installs without the lock"
    elif module == "pytest":
        for path in (a.split("::")[0] for a in rest if a.startswith("tests/")):
            assert (ROOT / path).is_file(), f"{where}: no {path}"
    elif module.startswith("otlp.instances."):  # the folder instances/ (linked as otlp/instances)
        path = ROOT / Path(*module.split(".")[1:]).with_suffix(".py")
        _parse_script(path, rest, monkeypatch)
    else:
        assert module in EXTERNAL_TOOLS, f"{where}: unknown tool {module}"
