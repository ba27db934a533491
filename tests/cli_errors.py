"""The command line's usage errors (exit status 2, docs/decoding.md; every command's in
tests/test_cli_contract.py) as the tests check them: one line on stderr, ``error:`` in it,
neither a usage block nor a traceback."""

from __future__ import annotations

import pytest

from otlp.cli import main


def usage_error(argv: list[str], capsys: pytest.CaptureFixture, *words: str) -> str:
    """Runs ``otlp`` with ``argv``: it must exit with status 2 and write one line to stderr,
    with ``error:`` and each of ``words`` in it, no usage block and no traceback; that line."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "usage:" not in err and "Traceback" not in err, err
    for word in ("error:", *words):
        assert word in lines[0], err
    return lines[0]
