"""Markdown table rows for the benchmark report's tables (report.md, docs/benchmarks.md)."""

from __future__ import annotations

from collections.abc import Sequence


def table_row(cells: Sequence[str]) -> str:
    """One table row: ``| a | b |``."""
    return "| " + " | ".join(cells) + " |"


def table_head(columns: Sequence[str]) -> list[str]:
    """A table's head: the column names and the rule under them."""
    return [table_row(columns), table_row(["---"] * len(columns))]
