"""The command line's usage errors (exit status 2, docs/decoding.md) as the tests of ``otlp decode``
check them: one line on stderr, no traceback."""

from __future__ import annotations

import pytest

from otlp.cli import main


def usage_error(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    """Runs ``otlp`` with ``argv``: it must exit with status 2 and write one line to stderr,
    with no traceback; that line."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    return err
