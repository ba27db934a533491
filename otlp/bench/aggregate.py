"""Per-cell summaries of the per-token records (one flat row per cell for CSV and tables).

Times are over the tokens that produced a result; acceptance is averaged over verified
tokens only (a failed verification is counted, never averaged in). ``success`` is verified
without falling back ([GR] Table 1 reports global resolution's success this way).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from otlp.bench.cells import METHOD, Cell, describe_selection
from otlp.bench.records import ERROR, FAILED, OK

SUMMARY_FIELDS = (
    "id",
    "suite",
    "scheme",
    "k",
    "n",
    "kind",
    "name",
    "tau",
    "label",
    "select",
    "tokens",
    "verified",
    "failed",
    "errors",
    "unmeasured",
    "status",
    "fallbacks",
    "verified_rate",
    "success_rate",
    "fallback_rate",
    "time_median_ms",
    "time_p90_ms",
    "time_mean_ms",
    "acceptance_mean",
    "alpha_star_mean",
    "max_target_l1",
    "max_abs_gap",
    "min_entry",
    # spread over the cell's tokens, drawn as bands and whiskers in the figures
    "time_p10_ms",
    "acceptance_p10",
    "acceptance_p90",
    "alpha_star_p10",
    "alpha_star_p90",
)


def summarize(record: dict[str, Any]) -> dict[str, Any]:
    """One cell's summary row (see :data:`SUMMARY_FIELDS`)."""
    cell = record["cell"]
    tokens = record["tokens"]
    statuses = [t["status"] for t in tokens]
    verified = [t for t in tokens if t["status"] == OK]
    times = np.array([t["time_s"] for t in tokens if t["time_s"] is not None], dtype=float)
    fallbacks = sum(bool(t["fallback"]) for t in verified)
    count = len(tokens)
    gaps = [abs(t["alpha_star"] - t["acceptance"]) for t in verified if t["alpha_star"] is not None]
    return {
        "id": record["id"],
        **{key: cell[key] for key in ("suite", "scheme", "k", "n", "kind", "name", "tau")},
        "label": Cell.from_dict(cell).label,
        "select": describe_selection(Cell.from_dict(cell).select),
        "tokens": count,
        "verified": len(verified),
        "failed": statuses.count(FAILED),
        "errors": statuses.count(ERROR),
        "unmeasured": count - len(verified) - statuses.count(FAILED),
        "status": _cell_status(statuses),
        "fallbacks": fallbacks,
        "verified_rate": _rate(len(verified), count),
        "success_rate": _rate(len(verified) - fallbacks, count),
        "fallback_rate": _rate(fallbacks, count),
        "time_median_ms": _stat(np.median, times),
        "time_p90_ms": _stat(lambda x: np.percentile(x, 90), times),
        "time_mean_ms": _stat(np.mean, times),
        "acceptance_mean": _mean([t["acceptance"] for t in verified]),
        "alpha_star_mean": _mean([t["alpha_star"] for t in tokens if t["alpha_star"] is not None]),
        "max_target_l1": _max([t["target_l1"] for t in verified if t["target_l1"] is not None]),
        "max_abs_gap": _max(gaps) if cell["kind"] == METHOD else None,
        "min_entry": _min([t["min_entry"] for t in verified if t["min_entry"] is not None]),
        "time_p10_ms": _stat(lambda x: np.percentile(x, 10), times),
        **_spread("acceptance", [t["acceptance"] for t in verified]),
        **_spread("alpha_star", [t["alpha_star"] for t in tokens if t["alpha_star"] is not None]),
    }


def _spread(name: str, values: list[float]) -> dict[str, float | None]:
    """10th and 90th percentiles of ``values`` as ``{name}_p10`` and ``{name}_p90``."""
    low, high = np.percentile(values, [10, 90]) if values else (None, None)
    return {
        f"{name}_p10": None if low is None else float(low),
        f"{name}_p90": None if high is None else float(high),
    }


def summarize_all(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [summarize(record) for record in records]


def _cell_status(statuses: list[str]) -> str:
    """The most telling status of a cell: "ok" only if every token verified."""
    if statuses and all(s == OK for s in statuses):
        return OK
    if FAILED in statuses:
        return FAILED
    others = [s for s in statuses if s != OK]
    return max(set(others), key=others.count) if others else "empty"


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _stat(func: Any, times: np.ndarray) -> float | None:
    return float(func(times)) * 1e3 if times.size else None


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _max(values: list[float]) -> float | None:
    return float(np.max(values)) if values else None


def _min(values: list[float]) -> float | None:
    return float(np.min(values)) if values else None
