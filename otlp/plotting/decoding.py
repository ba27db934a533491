"""Figures of ``otlp decode --config``: block efficiency against L (one panel per K) and
against K (one panel per L), one pair per temperature and draft, methods in their fixed
styles (:mod:`otlp.plotting.style`), bars ± 1.96 standard errors."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from otlp.decoding.grid import Row
from otlp.plotting.style import dodge, legend, save, styles


def plot(rows: Sequence[Row], stem: Path, fmt: str | None = None) -> list[Path]:
    """Write the figures next to ``stem`` (``stem-T1-exit8-vs-L.png``, ...); returns them."""
    spec = [r for r in rows if r.method != "ar" and not r.shape.startswith("tree")]
    written = []
    for temperature, draft in dict.fromkeys((r.temperature, r.draft) for r in spec):
        group = [r for r in spec if r.temperature == temperature and r.draft == draft]
        name = f"{stem.name}-T{temperature:g}" + (f"-{draft}" if draft else "")
        title = f"block efficiency, T = {temperature:g}" + (f", draft {draft}" if draft else "")
        for axis, panel in (("depth", "paths"), ("paths", "depth")):
            path = stem.with_name(f"{name}-vs-{'L' if axis == 'depth' else 'K'}")
            written.append(_figure(group, axis, panel, title, path, fmt))
    return written


def _figure(
    rows: Sequence[Row], axis: str, panel: str, title: str, path: Path, fmt: str | None
) -> Path:
    from matplotlib.figure import Figure

    letter = {"depth": "L", "paths": "K"}
    panels = sorted({getattr(r, panel) for r in rows})
    methods = list(dict.fromkeys(r.method for r in rows))
    look = styles(methods)
    offsets = dict(zip(methods, dodge(len(methods), 0.3), strict=True))
    fig = Figure(figsize=(3.6 * len(panels) + 1.8, 3.6), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(panels), sharey=True))
    for ax, value in zip(axes, panels, strict=True):
        for method in methods:
            points = sorted(
                (getattr(r, axis), r)
                for r in rows
                if r.method == method and getattr(r, panel) == value
            )
            if not points:
                continue
            xs = [x + offsets[method] for x, _ in points]
            ys = [r.block_efficiency for _, r in points]
            err = [1.96 * np.nan_to_num(r.block_efficiency_se) for _, r in points]
            ax.errorbar(xs, ys, yerr=err, capsize=2, ms=5, label=method, **look[method].line())
        ax.set_title(f"{letter[panel]} = {value}", fontsize=9)
        ax.set_xlabel(f"draft {'length' if axis == 'depth' else 'paths'} {letter[axis]}")
        ax.set_xticks(sorted({getattr(r, axis) for r in rows}))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("block efficiency (tokens / target call)")
    legend(fig, axes, below=False)
    fig.suptitle(title, fontsize=8)
    return save(fig, path, fmt)
