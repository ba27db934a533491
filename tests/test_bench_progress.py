"""The bench runner reports progress through a callback; the command draws the bar."""

from __future__ import annotations

from pathlib import Path

import pytest

from otlp.bench import load_config, run_bench
from otlp.bench.runner import BenchProgress
from otlp.commands.bench import progress_bar
from tests.test_bench import TINY


def test_run_bench_reports_every_unit_to_its_callback(tmp_path: Path) -> None:
    config = tmp_path / "tiny.toml"
    config.write_text(TINY)
    events: list[BenchProgress] = []
    outcome = run_bench(load_config(config), tmp_path / "out", progress=events.append)
    start, *steps = events
    assert (start.work, start.cells, start.description) == (0.0, 0, None)
    assert steps and all(e.total_cells == start.total_cells for e in steps)
    assert sum(e.cells for e in steps) == start.total_cells == len(outcome.summaries)
    assert sum(e.work for e in steps) == pytest.approx(start.total_work)
    assert all(e.description and "k=" in e.description for e in steps)
    # resumed: nothing left to measure, so the only event is the start
    events.clear()
    run_bench(load_config(config), tmp_path / "out", progress=events.append)
    assert [(e.work, e.cells, e.total_cells) for e in events] == [(0.0, 0, 0)]


def test_the_bench_package_does_not_import_the_commands() -> None:
    import ast

    root = Path(__file__).resolve().parents[1] / "otlp" / "bench"
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith("otlp.commands"), path
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("otlp.commands") for a in node.names), path


def test_the_commands_bar_takes_the_events() -> None:
    with progress_bar(False) as off:
        assert off is None
    with progress_bar(True) as report:
        assert report is not None
        report(BenchProgress(0.0, 0, 2.0, 1, None))
        report(BenchProgress(2.0, 1, 2.0, 1, "synthetic k=4 n=2"))
