"""The figure of ``otlp validate``: each statement's worst margin on a symmetric log scale.

Margins are signed so that a negative one is a violated statement; printed statements that
the errata expect to fail are drawn apart (orange) from the checks that must hold (green, or
red when violated).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from otlp.plotting.style import save

if TYPE_CHECKING:
    from otlp.validate import Report

HOLDS, VIOLATED, PRINTED = "#117733", "#CC3311", "#EE7733"


def plot(report: Report, path: Path, fmt: str | None = None) -> Path:
    """Draw the worst margin per statement and write it to ``path``; returns the file."""
    from matplotlib.figure import Figure

    rows = report.results
    fig = Figure(figsize=(8, 0.22 * len(rows) + 1.2), layout="constrained")
    ax = fig.subplots()
    colors = [PRINTED if r.expect_fail else (HOLDS if r.ok else VIOLATED) for r in rows]
    margins = [r.worst_margin if math.isfinite(r.worst_margin) else 0.0 for r in rows]
    ax.barh(range(len(rows)), margins, color=colors)
    ax.set_yticks(range(len(rows)), [r.name for r in rows], fontsize=6)
    ax.invert_yaxis()
    ax.set_xscale("symlog", linthresh=1e-12)
    ax.set_xticks([-1e2, -1, -1e-4, -1e-8, 0, 1e-8, 1e-4, 1, 1e2])
    ax.axvline(0.0, color="black", lw=0.8)
    ax.set_xlabel("worst margin (< 0: violated; orange: printed statements expected to fail)")
    ax.set_title(f"otlp validate: {len(rows)} statements, seed {report.seed}")
    return save(fig, path, fmt)
