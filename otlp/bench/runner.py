"""One benchmark run: plan the grid, measure the unfinished cells, write every output.

Outputs in ``out_dir``: ``results.jsonl`` (the resumable store), ``results.csv`` (one row per
cell), ``tokens.csv`` (one row per token), ``results.json`` (machine, run, notes, cells with
their tokens), ``report.md`` and the PNG figures.
"""

from __future__ import annotations

import csv
import json
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from otlp.bench.aggregate import SUMMARY_FIELDS, summarize_all
from otlp.bench.cells import (
    Catalog,
    Cell,
    GridPlan,
    WorkUnit,
    describe_selection,
    plan_grid,
    suite_indices,
    work_units,
)
from otlp.bench.config import BenchConfig
from otlp.bench.executor import Records, run_dask, run_local
from otlp.bench.machine import machine_info
from otlp.bench.plots import draw_figures
from otlp.bench.report import render_report
from otlp.bench.store import ResultStore
from otlp.bench.tables import slices
from otlp.instances.suites import load
from otlp.reprs import dataclass_repr

log = logging.getLogger("otlp")

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


class BenchInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run: every finished cell is in ``store``; run again to resume."""

    def __init__(self, store: Path, cells_kept: int, cells_total: int) -> None:
        super().__init__(f"{cells_kept} of {cells_total} cells kept in {store}")
        self.store = store
        self.cells_kept = cells_kept
        self.cells_total = cells_total


@dataclass(frozen=True)
class BenchProgress:
    """One step of a run, handed to ``run_bench(progress=...)``: once at the start (``work``
    and ``cells`` 0), then as each work unit arrives — its estimated ``work`` and the
    ``cells`` it completed (a cell split in parts counts once all its parts arrived), out of
    ``total_work`` and ``total_cells``; ``description`` names the cell (None at the start)."""

    work: float
    cells: int
    total_work: float
    total_cells: int
    description: str | None


ProgressCallback = Callable[[BenchProgress], None]


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
    progress: ProgressCallback | None = None,
    command: str = "otlp bench",
    console: Console | None = None,
    figure_format: str = "png",
) -> BenchOutcome:
    """Run the sweeps of ``config`` (``suites`` replaces their suites) and write the outputs.

    Cells already in ``out_dir/results.jsonl`` are reused unless ``fresh``. Groups run on a
    local pool of ``workers`` processes (default: the config's), or on the Dask cluster at
    ``scheduler``. ``progress`` is called with a :class:`BenchProgress` at the start and
    for every work unit that arrives (``otlp bench`` draws its bar from these).
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
    units = work_units(todo)
    log.info(
        "%d cells (%d to measure, %d reused) in %d work units",
        len(grid.cells),
        len(todo),
        len(grid.cells) - len(todo),
        len(units),
    )
    workers = workers or config.workers
    if scheduler:
        executor, stream = f"Dask cluster at {scheduler}", run_dask(units, scheduler)
    else:
        executor = f"local process pool of {workers} spawned workers"
        stream = run_local(units, workers)
    for note in grid.notes:
        console.print(f"[yellow]note:[/] {note}")
    try:
        for batch in _merged_cells(_with_progress(stream, units, progress)):
            store.append({**record, "run": started} for record in batch)
    except KeyboardInterrupt:
        kept = sum(cell.id in store.load() for cell in grid.cells)
        raise BenchInterrupted(store.path, kept, len(grid.cells)) from None
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
    stream: Iterator[Records], units: Sequence[WorkUnit], report: ProgressCallback | None
) -> Iterator[Records]:
    """Pass ``stream`` through, reporting each unit's estimated work to ``report`` (an ETA
    from work done) and counting a group's cells once all its units arrived."""
    if not callable(report):  # None, or the bool flag of earlier releases: the caller draws
        yield from stream
        return
    total_cells = len({cell.id for unit in units for cell in unit.cells})
    cost = {(unit.cells[0].id, unit.part): unit.cost for unit in units}
    total_work = sum(cost.values())
    report(BenchProgress(0.0, 0, total_work, total_cells, None))
    arrived: dict[str, int] = {}
    for records in stream:
        first, cell = records[0], records[0]["cell"]
        arrived[first["id"]] = arrived.get(first["id"], 0) + 1
        report(
            BenchProgress(
                cost[(first["id"], first["part"])],
                len(records) if arrived[first["id"]] == first["parts"] else 0,
                total_work,
                total_cells,
                f"{cell['suite']} k={cell['k']} n={cell['n']}",
            )
        )
        yield records


def _merged_cells(stream: Iterator[Records]) -> Iterator[Records]:
    """Whole-cell records: the token slices of a group's units joined once all arrived."""
    pending: dict[str, list[Records]] = {}
    for records in stream:
        first = records[0]
        if first["parts"] == 1:
            yield [_whole(record) for record in records]
            continue
        key = first["id"]
        pending.setdefault(key, []).append(records)
        if len(pending[key]) == first["parts"]:
            pieces = sorted(pending.pop(key), key=lambda rs: rs[0]["part"])
            merged = []
            for slices in zip(*pieces, strict=True):
                tokens = [token for piece in slices for token in piece["tokens"]]
                merged.append({**_whole(slices[0]), "tokens": tokens})
            yield merged


def _whole(record: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in record.items() if key not in ("part", "parts")}


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
