"""Markdown table rows for the benchmark report's tables (report.md, docs/benchmarks.md)."""

from __future__ import annotations

from collections.abc import Sequence


def table_row(cells: Sequence[str]) -> str:
    """One table row: ``| a | b |``."""
    return "| " + " | ".join(cells) + " |"


def table_head(columns: Sequence[str], align: str | None = None) -> list[str]:
    """A table's head: the column names and the rule under them, ``| --- |`` a column; with
    ``align`` (a letter a column: ``l`` left, ``r`` right) the rule the command lines print,
    ``|---|---:|``."""
    if align is None:
        return [table_row(columns), table_row(["---"] * len(columns))]
    if len(align) != len(columns) or set(align) - {"l", "r"}:
        raise ValueError(
            f"align: expected l or r for each of {len(columns)} columns, got {align!r}"
        )
    return [table_row(columns), "|" + "".join("---:|" if a == "r" else "---|" for a in align)]
