"""Views of the summary rows that both the Markdown report and the plots use."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from otlp.bench.cells import ALPHA, METHOD

Row = dict[str, Any]


@dataclass(frozen=True)
class Slice:
    """The rows of one (suite, item selection, scheme): tables and figures are drawn per slice."""

    suite: str
    select: str
    scheme: str
    rows: tuple[Row, ...]

    @property
    def key(self) -> str:
        """File-name stem: the suite, the selected meta values, the scheme unless i.i.d."""
        values = [v for part in self.select.split(",") if part for v in part.split("=")[1:]]
        parts = [self.suite, *values] + ([] if self.scheme == "iid" else [self.scheme])
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(parts))

    def of_kind(self, kind: str) -> list[Row]:
        return [row for row in self.rows if row["kind"] == kind]

    def labels(self, kind: str) -> list[str]:
        """Method or rule labels in first-seen order."""
        return list(dict.fromkeys(row["label"] for row in self.of_kind(kind)))

    def points(self, kind: str) -> list[tuple[int, int]]:
        """(k, n) points with a cell of ``kind``, sorted."""
        return sorted({(row["k"], row["n"]) for row in self.of_kind(kind)})

    def lookup(self, kind: str) -> dict[tuple[int, int, str], Row]:
        return {(row["k"], row["n"], row["label"]): row for row in self.of_kind(kind)}

    def alpha_beside(self, kind: str) -> dict[tuple[int, int], float]:
        """(k, n) -> mean alpha* over the same tokens as the ``kind`` cells there."""
        return {
            (row["k"], row["n"]): row["alpha_star_mean"]
            for row in self.of_kind(kind)
            if measured(row) and row["alpha_star_mean"] is not None
        }

    def alpha_tokens(self) -> int:
        """Tokens per cell of the alpha* table: the largest token count among its cells."""
        return max((row["tokens"] for row in self.of_kind(ALPHA)), default=0)

    def alpha_star(self) -> dict[tuple[int, int], float]:
        """(k, n) -> mean alpha* ([GR] Figure 1), from the cells with the most tokens only,
        so that every entry averages over the same suite items."""
        tokens = self.alpha_tokens()
        return {
            (row["k"], row["n"]): row["alpha_star_mean"]
            for row in self.of_kind(ALPHA)
            if row["alpha_star_mean"] is not None and row["tokens"] == tokens
        }


def slices(rows: Iterable[Row], extra: Iterable[Row] = ()) -> list[Slice]:
    """Rows split by (suite, selection, scheme) in first-seen order; ``extra`` rows (cells left
    out by a size cap) join their slice so that tables can mark them."""
    grouped: dict[tuple[str, str, str], list[Row]] = {}
    for row in [*rows, *extra]:
        grouped.setdefault((row["suite"], row["select"], row["scheme"]), []).append(row)
    return [Slice(*key, tuple(group)) for key, group in grouped.items()]


def measured(row: Row) -> bool:
    """Whether the row holds measurements (not a cell left out by a size cap)."""
    return "tokens" in row


def best_under_limit(piece: Slice, limit_ms: float) -> dict[str, Row | None]:
    """Per method: the cell of highest mean acceptance whose mean per-token time is at most
    ``limit_ms`` and whose every token verified ([GR] Table 2)."""
    best: dict[str, Row | None] = dict.fromkeys(piece.labels(METHOD))
    for row in piece.of_kind(METHOD):
        if not measured(row) or row["verified_rate"] != 1.0 or row["time_mean_ms"] is None:
            continue
        if row["time_mean_ms"] > limit_ms:
            continue
        current = best[row["label"]]
        if current is None or row["acceptance_mean"] > current["acceptance_mean"]:
            best[row["label"]] = row
    return best
