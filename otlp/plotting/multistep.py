"""The figure of ``otlp multistep``: block efficiency against L, one panel per K."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from otlp.multistep.sweep import LP_LABEL, EfficiencyRow


def plot(rows: Sequence[EfficiencyRow], gammas: Sequence[int], title: str, path: Path) -> None:
    """Block efficiency vs L: one panel per K, one line per method, the LP optimum dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from otlp.commands.multistep import _grid, _label

    grid = _grid(rows)
    ks = sorted({k for _, k, _ in grid})
    labels = sorted({method for method, _, _ in grid} - {LP_LABEL})
    colors = {label: f"C{i % 10}" for i, label in enumerate(labels)} | {LP_LABEL: "k"}
    fig, axes = plt.subplots(1, len(ks), figsize=(4 * len(ks), 3.5), sharey=True, squeeze=False)
    for ax, k in zip(axes[0], ks, strict=True):
        for (method, kk, source), cells in grid.items():
            if kk != k:
                continue
            xs = [g for g in gammas if g in cells]
            ys = [cells[g].block_efficiency for g in xs]
            style = "--" if method == LP_LABEL else ("o:" if source == "simulation" else "o-")
            ax.plot(xs, ys, style, color=colors[method], label=_label(method, source))
        ax.set_title(f"K = {k}")
        ax.set_xlabel("draft length L")
        ax.set_xticks(list(gammas))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("block efficiency (tokens / target call)")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
