"""The figure of ``otlp compare``: each rule's exact acceptance against n, beside alpha*.

One panel per suite. Every rule keeps its colour and marker from :mod:`otlp.plotting.style`;
rules are dots offset sideways at each n (a dot plot: no lines whose slope the offsets would
distort), so rules with equal acceptance (``ot`` and ``canonical`` attain alpha* exactly)
stay visible; the lossy ``mentored`` rule is dotted with
hollow markers. Markers are means over the suite's items, bars their 10th–90th percentiles;
alpha* is the black dashed bar across each group, its spread the grey box.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from otlp.plotting.style import bound_marks, display, dodge, dots_with_spread, legend, save, styles

if TYPE_CHECKING:
    from otlp.rules.comparison import Record, SummaryRow


def plot(
    summary: Sequence[SummaryRow],
    rules: Sequence[str],
    path: Path,
    records: Sequence[Record] = (),
    fmt: str | None = None,
) -> Path:
    """Draw the comparison and write it to ``path`` (format: ``fmt`` or the suffix); returns
    the file written. ``records`` (one per item, n and rule) give the spread bars."""
    from matplotlib.figure import Figure

    suites = list(dict.fromkeys(row.suite for row in summary))
    fig = Figure(figsize=(5.2 * len(suites) + 1.0, 4.6), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(suites), sharey=True))
    look = styles(rules)
    offsets = dict(zip(rules, dodge(len(rules), width=0.6), strict=True))
    for ax, suite in zip(axes, suites, strict=True):
        rows = [row for row in summary if row.suite == suite]
        ns = [row.n for row in rows]
        mine = [r for r in records if r.suite == suite]
        alphas = [row.bounds[row.scheme] for row in rows]
        first = [r for r in mine if r.rule == rules[0]]
        bound_marks(
            ax,
            ns,
            alphas,
            [_spread([r.alpha_star for r in first if r.n == n]) for n in ns],
            0.6,
            "alpha* (optimal transport, the instances' drafts)",
        )
        for rule in rules:
            points = [(row.n, row.acceptance.get(rule, math.nan)) for row in rows]
            points = [(n, v) for n, v in points if not math.isnan(v)]
            if not points:
                continue
            xs = [n + offsets[rule] for n, _ in points]
            mean = [v for _, v in points]
            spreads = [
                _spread([r.acceptance for r in mine if r.n == n and r.rule == rule])
                for n, _ in points
            ]
            low = [s[0] if s else m for s, m in zip(spreads, mean, strict=True)]
            high = [s[1] if s else m for s, m in zip(spreads, mean, strict=True)]
            dots_with_spread(ax, xs, mean, low, high, look[rule], display(rule))
        ax.set_title(f"{suite} ({rows[0].items} pairs)", fontsize=9)
        ax.set_xlabel("number of drafts n (rules offset sideways)")
        ax.set_xticks(ns)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("acceptance: mean over pairs\n(bars, band: 10th–90th percentile)")
    legend(fig, axes, below=False)
    return save(fig, path, fmt)


def _spread(values: Sequence[float]) -> tuple[float, float] | None:
    finite = [v for v in values if not math.isnan(v)]
    if not finite:
        return None
    low, high = np.percentile(finite, [10, 90])
    return float(low), float(high)
