"""The README's two set-up commands exist, CI runs the test command verbatim, and the usage
snippet prints what the README says it prints."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def _bash_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", text, re.S)]


def test_readme_starts_with_the_main_job_and_the_test_command() -> None:
    main_job, test_command = _bash_blocks()[:2]
    assert main_job == 'python -m pip install -c constraints.txt -e ".[all]" && otlp bench'
    assert test_command == (
        'python -m pip install -c constraints.txt -e ".[test]" && python -m pytest'
    )


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    test_command = _bash_blocks()[1]
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_command in ci_lines


def test_ci_installs_into_a_fresh_virtual_environment_before_the_test_command() -> None:
    """CI sees what a new machine sees: a venv made in a temporary folder on every run and
    activated before the README's command, so nothing installed earlier leaks in."""
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    test_at = ci_lines.index(_bash_blocks()[1])
    made = next(i for i, line in enumerate(ci_lines) if line.startswith("python -m venv "))
    activated = next(i for i, line in enumerate(ci_lines) if line.startswith("source "))
    assert made < activated < test_at
    assert any("mktemp -d" in line for line in ci_lines[:made])


def test_the_usage_snippet_runs_and_prints_what_its_comments_say() -> None:
    """The first Python block under "Using it": every ``print(...)  # expected`` line prints
    the expected text (so the README's numbers are the code's)."""
    text = README.read_text()
    section = text[text.index("## Using it") :]
    code = section[section.index("```python\n") + len("```python\n") :]
    code = code[: code.index("```")]
    expected = [
        line.split("#", 1)[1].strip() for line in code.splitlines() if line.startswith("print(")
    ]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue().splitlines() == expected
