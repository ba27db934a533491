"""The packages type-check: mypy (configured in pyproject.toml) reports no error, and the
installed package says it is typed (PEP 561 ``py.typed``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_reports_no_error() -> None:
    # A fresh interpreter from the repository root: the [tool.mypy] section picks the files;
    # the incremental cache (.mypy_cache/, git-ignored) keeps repeated runs around a second.
    run = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_package_is_marked_typed() -> None:
    assert (ROOT / "otlp" / "py.typed").is_file()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'otlp = ["py.typed"]' in pyproject
