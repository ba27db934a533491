"""The resumable results file: one JSON line per finished cell, keyed by the cell id.

A run appends each group's cells as they finish; a later run skips every id already in the
file (``--resume``, the default) or starts from an empty file (``--fresh``). A line cut short
by a killed run is ignored and its cell measured again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

TIMING_FIELDS = ("time_s",)  # per-token fields that depend on the machine's moment
RUN_FIELDS = ("worker", "run")  # per-cell fields that say where, when and how it ran


class ResultStore:
    """Append-only JSON-lines file of cell records."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)

    def load(self) -> dict[str, dict[str, Any]]:
        """Cell id -> record, the last line winning; unreadable lines are skipped."""
        records: dict[str, dict[str, Any]] = {}
        if not self.path.exists():
            return records
        with self.path.open() as handle:
            for line in handle:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(record, dict) and "id" in record:
                    records[record["id"]] = record
        return records

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as handle:
            if not self._ends_line():  # end a line that a killed run left unfinished
                handle.write("\n")
            for record in records:
                handle.write(json.dumps(record, allow_nan=True) + "\n")
            handle.flush()

    def _ends_line(self) -> bool:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return True
        with self.path.open("rb") as handle:
            handle.seek(-1, 2)
            return handle.read(1) == b"\n"


def without_timings(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` less its timings and run details: what must agree between executors."""
    out = {key: value for key, value in record.items() if key not in RUN_FIELDS}
    out["tokens"] = [
        {key: value for key, value in token.items() if key not in TIMING_FIELDS}
        for token in record["tokens"]
    ]
    return out
