"""Figures per (suite, scheme) slice, drawn with matplotlib's object API (no pyplot state).

Every series takes its colour and marker from :mod:`otlp.plotting.style`, so a method or rule
looks the same in every figure and run. Means and medians carry their spread over the cell's
tokens (10th–90th percentile), cells left out by a size cap are drawn as ``×`` with a note,
and a figure that would carry no information is not drawn.

* ``acceptance_vs_k`` — α* against k for each n, with its p10–p90 band ([GR] Figure 1);
* ``time`` — per-token time of every method at every (k, n) cell, one dot plot, log scale;
* ``success`` — share verified (without fallback), drawn only when some cell is below 100 %;
* ``best_acceptance`` — best mean acceptance under each per-token time limit ([GR] Table 2);
* ``rules`` — each rule's exact acceptance against n beside α* ([SpecHub] Figure 1 style).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, NullLocator

from otlp.bench.cells import ALPHA, METHOD, RULE
from otlp.bench.tables import Row, Slice, best_under_limit, measured
from otlp.plotting.style import (
    BOUND,
    bound_marks,
    display,
    dodge,
    dots_with_spread,
    legend,
    save,
    styles,
)

PLAIN = FuncFormatter(lambda value, _: f"{value:g}")
SPREAD = "bars: 10th–90th percentile over tokens"
CAPPED_NOTE = "× = over the method's size cap (not run)"
Drawer = Callable[[Slice], Figure | None]


def draw_figures(
    piece: Slice, out_dir: Path, time_limits_ms: Sequence[float], fmt: str = "png"
) -> list[tuple[str, str]]:
    """Write the slice's figures into ``out_dir`` as ``fmt`` (png, svg or pdf); returns
    (caption, file name) pairs of the figures drawn."""
    figures: list[tuple[str, str, Drawer]] = [
        ("acceptance_vs_k", "Optimal acceptance alpha* against k for each n", _acceptance)
    ]
    if piece.of_kind(METHOD):
        figures += [
            ("time", "Per-token time of each method at each (k, n)", _times),
            ("success", "Share of tokens verified, and verified without fallback", _success),
            (
                "best_acceptance",
                "Best mean acceptance under a per-token time limit",
                partial(_best, time_limits_ms=time_limits_ms),
            ),
        ]
    if piece.of_kind(RULE):
        figures.append(("rules", "Rules' exact acceptance against n, with alpha*", _rules))
    written = []
    for stem, caption, draw in figures:
        fig = draw(piece)
        if fig is None:
            continue
        where = f" ({piece.select})" if piece.select else ""
        fig.suptitle(f"{caption}\n{piece.suite}{where}, {piece.scheme} drafts", fontsize=9)
        path = save(fig, out_dir / f"{piece.key}-{stem}", fmt)
        written.append((caption, path.name))
    return written


def _alpha_rows(piece: Slice) -> list[Row]:
    tokens = piece.alpha_tokens()
    return [
        r
        for r in piece.of_kind(ALPHA)
        if r["alpha_star_mean"] is not None and r["tokens"] == tokens
    ]


def _acceptance(piece: Slice) -> Figure | None:
    rows = _alpha_rows(piece)
    if not rows:
        return None
    ns = sorted({r["n"] for r in rows})
    ks = sorted({r["k"] for r in rows})
    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    ax = fig.subplots()
    colors = dict(zip(ns, _sequential(len(ns)), strict=True))
    ends = {}
    for n in ns:
        series = sorted((r["k"], r) for r in rows if r["n"] == n)
        xs = [k for k, _ in series]
        mean = [r["alpha_star_mean"] for _, r in series]
        ax.plot(xs, mean, marker="o", ms=4, color=colors[n], label=f"n = {n}")
        ends[n] = (xs[-1], mean[-1])
        low = np.array([r.get("alpha_star_p10") for _, r in series], dtype=float)
        high = np.array([r.get("alpha_star_p90") for _, r in series], dtype=float)
        # bands for the extreme n only: overlapping bands of every n would hide each other
        if n in (ns[0], ns[-1]) and not (np.isnan(low).any() or np.isnan(high).any()):
            ax.fill_between(xs, low, high, color=colors[n], alpha=0.12, linewidth=0)
    _k_axis(ax, ks, margin=1.15)
    for n, y in _spread_out({n: end[1] for n, end in ends.items()}, ax).items():
        ax.annotate(  # direct labels right of the line ends, pushed apart where lines crowd
            f"n={n}",
            ends[n],
            xytext=(1.01, y),
            textcoords=("axes fraction", "data"),
            va="center",
            fontsize=7,
            color=colors[n],
            arrowprops={"arrowstyle": "-", "color": colors[n], "lw": 0.5},
        )
    ax.set_ylabel("alpha* (mean over tokens)")
    ax.grid(alpha=0.3)
    tokens = piece.alpha_tokens()
    extremes = f"n = {ns[0]} and n = {ns[-1]}" if len(ns) > 1 else f"n = {ns[0]}"
    ax.set_title(f"{tokens} tokens per point; bands: 10th–90th percentile ({extremes})", fontsize=8)
    return fig


def _spread_out(values: dict[int, float], ax: Axes, gap: float = 0.035) -> dict[int, float]:
    """Label heights (data units) for line ends at ``values``, at least ``gap`` of the axis
    height apart, in the same order."""
    low, high = ax.get_ylim()
    step = gap * (high - low)
    placed: dict[int, float] = {}
    last = -np.inf
    for n in sorted(values, key=values.__getitem__):
        last = max(values[n], last + step)
        placed[n] = last
    return placed


def _sequential(count: int) -> list[tuple[float, ...]]:
    """Ordered colours for an ordered quantity (n): viridis without its pale yellow end."""
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    return [cmap(x) for x in np.linspace(0.0, 0.85, count)]


def _times(piece: Slice) -> Figure | None:
    points = piece.points(METHOD)
    cells = piece.lookup(METHOD)
    labels = piece.labels(METHOD)
    if not points:
        return None
    look = styles(labels)
    fig = Figure(figsize=(max(6.4, 0.95 * len(points) + 2.5), 4.4), layout="constrained")
    ax = fig.subplots()
    ax.set_yscale("log")
    x = np.arange(len(points))
    offsets = dodge(len(labels), width=0.7)
    capped: list[tuple[float, str]] = []
    for offset, label in zip(offsets, labels, strict=True):
        xs, med, low, high = [], [], [], []
        for i, (k, n) in enumerate(points):
            row = cells.get((k, n, label))
            if row is None:
                continue
            if not measured(row) or row["time_median_ms"] is None:
                capped.append((x[i] + offset, label))
                continue
            xs.append(x[i] + offset)
            med.append(row["time_median_ms"])
            low.append(row.get("time_p10_ms") or row["time_median_ms"])
            high.append(row["time_p90_ms"])
        if not xs:
            continue
        dots_with_spread(ax, xs, med, low, high, look[label], display(label), ms=6, elinewidth=1)
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(PLAIN)
    ax.yaxis.set_minor_formatter(NullFormatter())
    if capped:
        top = ax.get_ylim()[1]
        for xpos, label in capped:
            ax.plot([xpos], [top], "x", color=look[label].color, ms=6, clip_on=False)
        ax.set_ylim(top=top)
    ax.set_xticks(x, [f"({k}, {n})" for k, n in points], fontsize=8)
    for edge in x[:-1] + 0.5:
        ax.axvline(edge, color="0.9", linewidth=0.8, zorder=0)
    ax.set_xlim(-0.5, len(points) - 0.5)
    ax.set_xlabel("(k, n)")
    ax.set_ylabel("ms per token (median; bar: p10–p90)")
    ax.grid(alpha=0.3, axis="y", which="both")
    notes = [SPREAD] + ([CAPPED_NOTE] if capped else [])
    ax.set_title("; ".join(notes), fontsize=8)
    legend(fig, [ax])
    return fig


def _success(piece: Slice) -> Figure | None:
    """Drawn only when some measured cell is below 100 % (all-1.0 bars carry no information)."""
    rows = [r for r in piece.of_kind(METHOD) if measured(r) and r["verified_rate"] is not None]
    if all(r["verified_rate"] == 1.0 and r["success_rate"] == 1.0 for r in rows):
        return None
    points = piece.points(METHOD)
    cells = piece.lookup(METHOD)
    labels = piece.labels(METHOD)
    look = styles(labels)
    fig = Figure(figsize=(max(6.4, 0.95 * len(points) + 2.5), 4.2), layout="constrained")
    ax = fig.subplots()
    x = np.arange(len(points))
    for offset, label in zip(dodge(len(labels), width=0.7), labels, strict=True):
        kw = look[label].line()
        for i, (k, n) in enumerate(points):
            row = cells.get((k, n, label))
            if row is None or not measured(row) or row["verified_rate"] is None:
                continue
            xpos = x[i] + offset
            ax.plot([xpos, xpos], [row["success_rate"], row["verified_rate"]], color=kw["color"])
            ax.plot(
                [xpos],
                [row["verified_rate"]],
                kw["marker"],
                color=kw["color"],
                ms=6,
                markerfacecolor="white",
            )
            ax.plot(
                [xpos],
                [row["success_rate"]],
                kw["marker"],
                color=kw["color"],
                ms=6,
                label=display(label),
            )
    ax.set_xticks(x, [f"({k}, {n})" for k, n in points], fontsize=8)
    ax.set_ylim(0, 1.04)
    ax.set_xlabel("(k, n)")
    ax.set_ylabel("share of tokens")
    ax.set_title("filled: verified without fallback; hollow: verified", fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    legend(fig, [ax])
    return fig


def _best(piece: Slice, time_limits_ms: Sequence[float]) -> Figure | None:
    labels = piece.labels(METHOD)
    if not labels or not time_limits_ms:
        return None
    look = styles(labels)
    best = {limit: best_under_limit(piece, limit) for limit in time_limits_ms}
    fig = Figure(figsize=(6.8, 0.45 * len(labels) + 1.8), layout="constrained")
    ax = fig.subplots()
    y = np.arange(len(labels))[::-1]
    shifts = dodge(len(time_limits_ms), width=0.4)
    for ypos, label in zip(y, labels, strict=True):
        kw = look[label].line()
        for shift, (j, limit) in zip(shifts, enumerate(time_limits_ms), strict=True):
            row = best[limit][label]
            if row is None:
                ax.annotate(
                    f"none ≤ {limit:g} ms",
                    (0.01, ypos - shift),
                    xycoords=("axes fraction", "data"),
                    va="center",
                    fontsize=6,
                    color="0.4",
                )
                continue
            mean = row["acceptance_mean"]
            low = row.get("acceptance_p10") or mean
            high = row.get("acceptance_p90") or mean
            ax.errorbar(
                [mean],
                [ypos - shift],
                xerr=[[mean - low], [high - mean]],
                marker=kw["marker"],
                color=kw["color"],
                ms=7,
                capsize=2,
                markerfacecolor=kw["color"] if j == len(time_limits_ms) - 1 else "white",
                linestyle="none",
                elinewidth=0.8,
                ecolor=(*to_rgb(kw["color"]), 0.45),
            )
            ax.annotate(
                f"{mean:.3f} at ({row['k']},{row['n']})",
                (mean, ypos - shift),
                xytext=(7, 0),
                textcoords="offset points",
                va="center",
                fontsize=6,
                bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none"},
            )
    ax.set_yticks(y, [display(label) for label in labels], fontsize=8)
    ax.set_ylim(-0.7, len(labels) - 0.3)
    ax.set_xlim(0, 1.0)
    ax.set_xlabel("best mean acceptance over tokens (bar: p10–p90); label: value at (k, n)")
    ax.grid(alpha=0.3, axis="x")
    proxies: list[Artist] = [
        Line2D(
            [],
            [],
            marker="o",
            color="0.3",
            linestyle="none",
            markerfacecolor="0.3" if j == len(time_limits_ms) - 1 else "white",
        )
        for j in range(len(time_limits_ms))
    ]
    fig.legend(
        proxies,
        [f"≤ {limit:g} ms/token" for limit in time_limits_ms],
        loc="outside lower center",
        fontsize=7,
        ncols=len(proxies),
    )
    return fig


def _rules(piece: Slice) -> Figure | None:
    rows = [r for r in piece.of_kind(RULE) if measured(r) and r["acceptance_mean"] is not None]
    ks = sorted({r["k"] for r in rows if len({s["n"] for s in rows if s["k"] == r["k"]}) > 1})
    if not ks:
        return None
    labels = piece.labels(RULE)
    look = styles(labels)
    fig = Figure(figsize=(3.6 * len(ks) + 1.2, 4.4), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(ks), sharey=True))
    offsets = dict(zip(labels, dodge(len(labels), width=0.5), strict=True))
    for ax, k in zip(axes, ks, strict=True):
        ns = sorted({r["n"] for r in rows if r["k"] == k})
        by_n = {r["n"]: r for r in rows if r["k"] == k and r.get("alpha_star_mean") is not None}
        at = [n for n in ns if n in by_n]
        bound_marks(
            ax,
            at,
            [by_n[n]["alpha_star_mean"] for n in at],
            [_p10_p90(by_n[n], "alpha_star") for n in at],
            0.5,
            "alpha* (optimal transport)",
        )
        for label in labels:
            series = sorted((r["n"], r) for r in rows if r["k"] == k and r["label"] == label)
            if not series:
                continue
            xs = [n + offsets[label] for n, _ in series]
            mean = [r["acceptance_mean"] for _, r in series]
            low = [r.get("acceptance_p10") or m for (_, r), m in zip(series, mean, strict=True)]
            high = [r.get("acceptance_p90") or m for (_, r), m in zip(series, mean, strict=True)]
            dots_with_spread(ax, xs, mean, low, high, look[label], display(label))
        left_out = [r for r in piece.of_kind(RULE) if r["k"] == k and not measured(r)]
        top = ax.get_ylim()[1]
        for r in left_out:  # the cell exists but was not run: a marker at the top edge
            color = look[r["label"]].color if r["label"] in look else BOUND
            ax.plot([r["n"] + offsets.get(r["label"], 0.0)], [top], "x", color=color, clip_on=False)
        ax.set_ylim(top=top)
        capped = sorted({r["label"] for r in left_out})
        title = f"k = {k}" + (f"\n× = not run (size cap): {', '.join(capped)}" if capped else "")
        ax.set_title(title, fontsize=8)
        ax.set_xticks(ns)
        ax.set_xlabel("n drafts (rules offset sideways)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("acceptance (mean over tokens)\nbars, grey boxes: 10th–90th percentile")
    legend(fig, axes)
    return fig


def _p10_p90(row: Row, name: str) -> tuple[float, float] | None:
    low, high = row.get(f"{name}_p10"), row.get(f"{name}_p90")
    return None if low is None or high is None else (low, high)


def _k_axis(ax: Axes, ks: Sequence[int], margin: float = 1.3) -> None:
    """Log-scaled top-k axis with the measured k values as plain tick labels."""
    ax.set_xscale("log")
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(ks[0] / 1.3, ks[-1] * margin)
    ax.set_xlabel("top-k")
