"""One token's result record and its statuses: what every measured cell writes per token.

Method, rule and decoder cells (:mod:`otlp.bench.worker`, :mod:`otlp.bench.decoder_cells`) all
report a token through :func:`token_record`; the aggregation reads these fields.
"""

from __future__ import annotations

from typing import Any

from otlp.instances.suites import SuiteItem

# Token statuses.
OK, FAILED, ERROR, TOO_LARGE, NOT_APPLICABLE = "ok", "failed", "error", "too_large", "n/a"


def token_record(
    index: int,
    item: SuiteItem,
    omega: list[int] | None,
    status: str,
    *,
    time_s: float | None = None,
    acceptance: float | None = None,
    alpha_star: float | None = None,
    target_l1: float | None = None,
    draft_l1: float | None = None,
    min_entry: float | None = None,
    fallback: bool | None = None,
    message: str = "",
) -> dict[str, Any]:
    """The record of suite item ``index`` (drafts ``omega``) for one cell."""
    return {
        "index": index,
        "item": item.name,
        "omega": omega,
        "status": status,
        "time_s": time_s,
        "acceptance": acceptance,
        "alpha_star": alpha_star,
        "target_l1": target_l1,
        "draft_l1": draft_l1,
        "min_entry": min_entry,
        "fallback": fallback,
        "message": message,
    }
