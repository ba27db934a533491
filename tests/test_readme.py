"""The README's two set-up commands exist, and CI runs the test command verbatim."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _bash_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", text, re.S)]


def test_readme_starts_with_the_main_job_and_the_test_command() -> None:
    main_job, test_command = _bash_blocks()[:2]
    assert main_job == 'python -m pip install -e ".[all]" && otlp bench'
    assert test_command == 'python -m pip install -e ".[test]" && python -m pytest'


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    test_command = _bash_blocks()[1]
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_command in ci_lines
