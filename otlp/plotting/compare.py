"""The figure of ``otlp compare``: mean exact acceptance against n per rule."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from otlp.commands.compare import SummaryRow


def plot(summary: list[SummaryRow], rules: list[str], path: Path) -> None:
    """Mean acceptance against n per rule, one panel per suite, alpha* dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    suites = list(dict.fromkeys(row.suite for row in summary))
    fig, axes = plt.subplots(1, len(suites), figsize=(6 * len(suites), 4.5), squeeze=False)
    for ax, suite in zip(axes[0], suites, strict=True):
        rows = [row for row in summary if row.suite == suite]
        ns = [row.n for row in rows]
        alphas = [row.bounds[row.scheme] for row in rows]
        label = f"alpha* (OT, {_bound_labels()[rows[0].scheme]})"
        ax.plot(ns, alphas, "k--", lw=2, label=label)
        for rule in rules:
            values = [row.acceptance.get(rule, math.nan) for row in rows]
            if not all(math.isnan(v) for v in values):
                style = ":" if rule == "mentored" else "-"
                ax.plot(ns, values, style, marker="o", ms=4, label=rule)
        ax.set_title(f"{suite} ({rows[0].items} pairs)")
        ax.set_xlabel("number of drafts n")
        ax.set_ylabel("mean acceptance")
        ax.set_xticks(ns)
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _bound_labels() -> dict[str, str]:
    from otlp.commands.compare import BOUND_LABELS

    return BOUND_LABELS
