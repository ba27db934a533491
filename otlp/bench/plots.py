"""PNG figures per (suite, scheme) slice, drawn with matplotlib's object API (no pyplot state).

* acceptance against k for each n (seed 000 Figure 1);
* per-token time against k, log scale, per method (median, whisker to p90);
* success rates per method and (k, n);
* best acceptance under each time limit (seed 000 Table 2 as bars);
* rules' acceptance against n for each k, beside alpha* (seed 001 Figure 1 style).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, NullLocator

from otlp.bench.cells import METHOD, RULE
from otlp.bench.tables import Slice, best_under_limit, measured

DPI = 110
PLAIN = FuncFormatter(lambda value, _: f"{value:g}")


def draw_figures(
    piece: Slice, out_dir: Path, time_limits_ms: Sequence[float]
) -> list[tuple[str, str]]:
    """Write the slice's figures into ``out_dir``; returns (caption, file name) pairs."""
    figures = [("acceptance_vs_k", "Optimal acceptance alpha* against k for each n", _acceptance)]
    if piece.of_kind(METHOD):
        figures += [
            ("time_vs_k", "Per-token time against k per method (log scale)", _times),
            ("success", "Share of tokens verified, and verified without fallback", _success),
            (
                "best_acceptance",
                "Best acceptance under a per-token time limit",
                partial(_best, time_limits_ms=time_limits_ms),
            ),
        ]
    if piece.of_kind(RULE):
        figures.append(("rules", "Rules' exact acceptance against n, with alpha*", _rules))
    written = []
    for stem, caption, draw in figures:
        fig = draw(piece)
        name = f"{piece.key}-{stem}.png"
        where = f" ({piece.select})" if piece.select else ""
        fig.suptitle(f"{caption}\n{piece.suite}{where}, {piece.scheme} drafts", fontsize=9)
        fig.savefig(out_dir / name, dpi=DPI)
        written.append((caption, name))
    return written


def _acceptance(piece: Slice) -> Figure:
    alpha = piece.alpha_star()
    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.subplots()
    for n in sorted({n for _, n in alpha}):
        ks = sorted(k for k, m in alpha if m == n)
        ax.plot(ks, [alpha[(k, n)] for k in ks], marker="o", label=f"n = {n}")
    _k_axis(ax, sorted({k for k, _ in alpha}))
    ax.set_ylabel("alpha* (mean over tokens)")
    ax.grid(alpha=0.3)
    _legend_below(fig, [ax])
    return fig


def _times(piece: Slice) -> Figure:
    rows = [r for r in piece.of_kind(METHOD) if measured(r) and r["time_median_ms"] is not None]
    ns = sorted({r["n"] for r in rows})
    labels = piece.labels(METHOD)
    fig = Figure(figsize=(2.6 * max(len(ns), 1) + 1.5, 4), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, max(len(ns), 1), sharey=True))
    for ax, n in zip(axes, ns, strict=False):
        for color, label in enumerate(labels):
            series = sorted(
                (
                    (r["k"], r["time_median_ms"], r["time_p90_ms"])
                    for r in rows
                    if r["n"] == n and r["label"] == label
                ),
            )
            if not series:
                continue
            ks, median, p90 = (np.array(v) for v in zip(*series, strict=True))
            ax.errorbar(
                ks,
                median,
                yerr=np.vstack([np.zeros_like(median), p90 - median]),
                marker="o",
                capsize=3,
                color=f"C{color}",
                label=label,
            )
        _k_axis(ax, sorted({r["k"] for r in rows if r["n"] == n}))
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(PLAIN)
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_title(f"n = {n}", fontsize=9)
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("ms per token (median, bar to p90)")
    _legend_below(fig, axes)
    return fig


def _legend_below(fig: Figure, axes: Iterable[Axes]) -> None:
    """One legend under the panels with every labelled line or bar set, each once."""
    handles: dict[str, Artist] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    if handles:
        fig.legend(
            list(handles.values()),
            list(handles),
            loc="outside lower center",
            fontsize=7,
            ncols=min(len(handles), 4),
        )


def _k_axis(ax: Axes, ks: Sequence[int]) -> None:
    """Log-scaled top-k axis with the measured k values as plain tick labels."""
    ax.set_xscale("log")
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.xaxis.set_minor_locator(NullLocator())
    if len(ks) == 1:
        ax.set_xlim(ks[0] / 2, ks[0] * 2)
    ax.set_xlabel("top-k")


def _success(piece: Slice) -> Figure:
    labels = piece.labels(METHOD)
    points = piece.points(METHOD)
    cells = piece.lookup(METHOD)
    width = 0.8 / max(len(labels), 1)
    fig = Figure(figsize=(max(6.0, 0.9 * len(points) + 2), 4), layout="constrained")
    ax = fig.subplots()
    x = np.arange(len(points))
    for i, label in enumerate(labels):
        found = [cells.get((k, n, label)) for k, n in points]
        verified = [r["verified_rate"] if r and measured(r) else np.nan for r in found]
        success = [r["success_rate"] if r and measured(r) else np.nan for r in found]
        offset = x - 0.4 + (i + 0.5) * width
        bars = ax.bar(offset, verified, width, alpha=0.35)
        ax.bar(
            offset, success, width, color=bars.patches[0].get_facecolor(), alpha=1.0, label=label
        )
    ax.set_xticks(x, [f"({k}, {n})" for k, n in points], fontsize=8)
    ax.set_xlabel("(k, n); light: verified, dark: verified without fallback")
    ax.set_ylabel("share of tokens")
    ax.set_ylim(0, 1.05)
    _legend_below(fig, [ax])
    return fig


def _best(piece: Slice, time_limits_ms: Sequence[float]) -> Figure:
    labels = piece.labels(METHOD)
    width = 0.8 / max(len(labels), 1)
    fig = Figure(figsize=(6.5, 4), layout="constrained")
    ax = fig.subplots()
    x = np.arange(len(time_limits_ms))
    floor = 1.0
    for i, label in enumerate(labels):
        best = [best_under_limit(piece, limit)[label] for limit in time_limits_ms]
        heights = [r["acceptance_mean"] if r else np.nan for r in best]
        offset = x - 0.4 + (i + 0.5) * width
        ax.bar(offset, heights, width, label=label)
        for xpos, row in zip(offset, best, strict=True):
            if row:
                floor = min(floor, row["acceptance_mean"])
                ax.annotate(
                    f"{row['k']},{row['n']}",
                    (xpos, row["acceptance_mean"]),
                    ha="center",
                    va="bottom",
                    fontsize=6,
                )
    ax.set_xticks(x, [f"≤ {limit:g} ms/token" for limit in time_limits_ms])
    ax.set_ylabel("best mean acceptance (label: k,n)")
    ax.set_ylim(max(0.0, floor - 0.1), 1.0)
    _legend_below(fig, [ax])
    return fig


def _rules(piece: Slice) -> Figure:
    rows = [r for r in piece.of_kind(RULE) if measured(r)]
    alpha = piece.alpha_beside(RULE)
    ks = sorted({r["k"] for r in rows})
    fig = Figure(figsize=(3.4 * max(len(ks), 1) + 1, 3.8), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, max(len(ks), 1), sharey=True))
    for ax, k in zip(axes, ks, strict=False):
        ns = sorted({r["n"] for r in rows if r["k"] == k})
        ax.plot(ns, [alpha.get((k, n), np.nan) for n in ns], "k--", label="alpha*")
        for label in piece.labels(RULE):
            series = sorted(
                (r["n"], r["acceptance_mean"])
                for r in rows
                if r["k"] == k and r["label"] == label and r["acceptance_mean"] is not None
            )
            if series:
                ax.plot(*zip(*series, strict=True), marker=".", label=label)
        ax.set_title(f"k = {k}", fontsize=9)
        ax.set_xticks(ns)
        ax.set_xlabel("n drafts")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("acceptance (mean over tokens)")
    _legend_below(fig, axes)
    return fig
