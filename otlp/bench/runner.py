"""One benchmark run: plan the grid, measure the unfinished cells, write every output.

Outputs in ``out_dir``: ``results.jsonl`` (the resumable store), ``results.csv`` (one row per
cell), ``tokens.csv`` (one row per token), ``results.json`` (machine, run, notes, cells with
their tokens), ``report.md`` and the PNG figures.
"""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from instances.suites import load
from otlp.bench.aggregate import SUMMARY_FIELDS, summarize_all
from otlp.bench.cells import (
    Catalog,
    Cell,
    GridPlan,
    describe_selection,
    group_cells,
    plan_grid,
    suite_indices,
)
from otlp.bench.config import BenchConfig
from otlp.bench.executor import Group, Records, run_dask, run_local
from otlp.bench.machine import machine_info
from otlp.bench.plots import draw_figures
from otlp.bench.report import render_report
from otlp.bench.store import ResultStore
from otlp.bench.tables import slices
from otlp.reprs import dataclass_repr

TOKEN_FIELDS = (
    "id",
    "index",
    "item",
    "omega",
    "status",
    "time_s",
    "acceptance",
    "alpha_star",
    "target_l1",
    "draft_l1",
    "min_entry",
    "fallback",
    "message",
)


@dataclass(frozen=True)
class BenchOutcome:
    """What a run did and wrote."""

    out_dir: Path
    files: tuple[Path, ...]
    cells_run: int
    cells_reused: int
    capped: int
    wall_s: float
    notes: tuple[str, ...]
    summaries: tuple[dict[str, Any], ...]

    __repr__ = dataclass_repr


def run_bench(
    config: BenchConfig,
    out_dir: str | Path,
    *,
    suites: Sequence[str] = (),
    scheduler: str | None = None,
    workers: int | None = None,
    fresh: bool = False,
    progress: bool = True,
    command: str = "otlp bench",
    console: Console | None = None,
    figure_format: str = "png",
) -> BenchOutcome:
    """Run the sweeps of ``config`` (``suites`` replaces their suites) and write the outputs.

    Cells already in ``out_dir/results.jsonl`` are reused unless ``fresh``. Groups run on a
    local pool of ``workers`` processes (default: the config's), or on the Dask cluster at
    ``scheduler``.
    """
    start = time.perf_counter()
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    console = console or Console(stderr=True)
    grid = plan_grid(config, Catalog.current(), suites)
    _check_selections(grid.cells)
    store = ResultStore(out / "results.jsonl")
    if fresh:
        store.clear()
    finished = store.load()
    todo = [cell for cell in grid.cells if cell.id not in finished]
    groups = group_cells(todo)
    workers = workers or config.workers
    if scheduler:
        executor, stream = f"Dask cluster at {scheduler}", run_dask(groups, scheduler)
    else:
        executor = f"local process pool of {workers} spawned workers"
        stream = run_local(groups, workers)
    for note in grid.notes:
        console.print(f"[yellow]note:[/] {note}")
    for batch in _with_progress(stream, groups, progress, console):
        store.append({**record, "run": started} for record in batch)
    records = store.load()
    summaries = summarize_all(records[cell.id] for cell in grid.cells)
    wall = time.perf_counter() - start
    run: dict[str, Any] = {
        "command": command,
        "config": config.source or "(built in)",
        "started": started,
        "executor": executor,
        "wall_s": wall,
        "cells_run": len(todo),
        "cells_reused": len(grid.cells) - len(todo),
        "runs": sorted({records[cell.id].get("run", "?") for cell in grid.cells}),
    }
    files = _write_outputs(out, config, grid, records, summaries, run, figure_format)
    return BenchOutcome(
        out,
        tuple(files),
        len(todo),
        run["cells_reused"],
        len(grid.capped),
        wall,
        grid.notes,
        tuple(summaries),
    )


def _check_selections(cells: Sequence[Cell]) -> None:
    """Refuse, before anything runs, a selection that no item of its suite matches."""
    for suite_name, select in {(cell.suite, cell.select) for cell in cells}:
        metas = [item.meta for item in load(suite_name)]
        if not suite_indices(metas, 1, select):
            raise ValueError(
                f"select: no item of suite {suite_name!r} matches {describe_selection(select)}"
            )


def _with_progress(
    stream: Iterator[Records], groups: Sequence[Group], enabled: bool, console: Console
) -> Iterator[Records]:
    total = sum(len(group) for group in groups)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("cells"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, disable=not enabled or not total) as bar:
        task = bar.add_task("otlp bench", total=total)
        for records in stream:
            cell = records[0]["cell"]
            bar.update(
                task,
                advance=len(records),
                description=f"{cell['suite']} k={cell['k']} n={cell['n']}",
            )
            yield records


def _write_outputs(
    out: Path,
    config: BenchConfig,
    grid: GridPlan,
    records: dict[str, dict[str, Any]],
    summaries: list[dict[str, Any]],
    run: dict[str, Any],
    figure_format: str = "png",
) -> list[Path]:
    machine = machine_info()
    cells = [records[cell.id] for cell in grid.cells]
    _write_csv(out / "results.csv", SUMMARY_FIELDS, summaries)
    _write_csv(
        out / "tokens.csv",
        TOKEN_FIELDS,
        ({"id": record["id"], **token} for record in cells for token in record["tokens"]),
    )
    (out / "results.json").write_text(
        json.dumps(
            {
                "machine": machine,
                "run": run,
                "notes": list(grid.notes),
                "capped": [_capped_row(cell, count) for cell, count in grid.capped],
                "cells": [
                    {**summary, "worker": record["worker"], "tokens": record["tokens"]}
                    for summary, record in zip(summaries, cells, strict=True)
                ],
            },
            separators=(",", ":"),
        )
    )
    pieces = slices(summaries, [_capped_row(cell, count) for cell, count in grid.capped])
    figures = {
        piece.key: draw_figures(piece, out, config.time_limits_ms, figure_format)
        for piece in pieces
    }
    suites = {
        piece.suite: {"description": (s := load(piece.suite)).description, "size": len(s)}
        for piece in pieces
    }
    report = render_report(
        pieces,
        machine=machine,
        run=run,
        suites=suites,
        notes=grid.notes,
        figures=figures,
        time_limits_ms=config.time_limits_ms,
    )
    (out / "report.md").write_text(report)
    names = ["results.jsonl", "results.csv", "tokens.csv", "results.json", "report.md"]
    return [out / name for name in names] + [out / f for v in figures.values() for _, f in v]


def _capped_row(cell: Cell, count: int) -> dict[str, Any]:
    return {
        **cell.as_dict(),
        "label": cell.label,
        "select": describe_selection(cell.select),
        "draft_columns": count,
    }


def _write_csv(path: Path, fields: Sequence[str], rows: Any) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(fields), extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow(row)
