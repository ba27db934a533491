"""The figure of ``otlp multistep``: block efficiency against the draft length L, per K.

One panel per number of paths K. Methods keep their colour and marker from
:mod:`otlp.plotting.style` (SpecTr traversal: the single-step rule's colour, dash-dot); the
[GBV] LP optimum is black and dashed, drawn on top. Equal values (block verification equals
GBV and the optimum at K = 1) stay visible because earlier methods are drawn with larger
markers underneath later ones. Exact values have no spread; Monte Carlo values (hollow
markers) carry a 95 % confidence bar (± 1.96 stderr).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from otlp.multistep.sweep import LP_LABEL, EfficiencyRow
from otlp.plotting.style import legend, save, styles


def plot(
    rows: Sequence[EfficiencyRow],
    gammas: Sequence[int],
    title: str,
    path: Path,
    fmt: str | None = None,
) -> Path:
    """Draw the sweep and write it to ``path`` (format: ``fmt`` or the suffix); returns the
    file written."""
    from matplotlib.figure import Figure

    ks = sorted({row.paths for row in rows})
    series: dict[tuple[str, str], list[EfficiencyRow]] = {}
    for row in rows:
        series.setdefault((row.method, row.source), []).append(row)
    methods = list(dict.fromkeys(method for method, _ in series))
    look = styles(methods)
    sizes = dict(zip(methods, np.linspace(9, 4, len(methods)), strict=True))
    fig = Figure(figsize=(4.2 * len(ks) + 1.6, 4.0), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(ks), sharey=True))
    for ax, k in zip(axes, ks, strict=True):
        for (method, source), group in series.items():
            points = sorted((r.gamma, r) for r in group if r.paths == k)
            if not points:
                continue
            kw = look[method].line()
            simulated = source == "simulation"
            if simulated:
                kw["markerfacecolor"] = "white"
            xs = [g for g, _ in points]
            ys = [r.block_efficiency for _, r in points]
            err = [1.96 * r.stderr if simulated else 0.0 for _, r in points]
            label = f"{method} (Monte Carlo)" if simulated else method
            if method == LP_LABEL:
                label, kw["marker"] = "LP optimum ([GBV])", ""
            ax.errorbar(
                xs,
                ys,
                yerr=err if simulated else None,
                ms=sizes[method],
                capsize=2,
                label=label,
                zorder=3 if method == LP_LABEL else 2,
                **kw,
            )
        ax.set_title(f"K = {k}", fontsize=9)
        ax.set_xlabel("draft length L")
        ax.set_xticks(list(gammas))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("block efficiency (tokens / target call)")
    legend(fig, axes, below=False)
    fig.suptitle(title, fontsize=8)
    return save(fig, path, fmt)
