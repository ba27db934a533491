"""One style table for every figure: a fixed colour, marker and line per method and rule.

A method or rule looks the same in every figure and every run, whatever else is drawn beside
it: the table is keyed by name, never by drawing order. Colours are the Okabe–Ito palette
(readable with the common colour-vision deficiencies) plus a few darker tones; bounds (α*, the
LP optimum) are black and dashed; lossy rules (``mentored``) are dotted with hollow markers and
say "lossy" in their label. Variants of one name (``global_resolution τ=0.001`` and
``τ=0.0001``) share the colour and differ in line style and marker fill.
"""

from __future__ import annotations

import argparse
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # matplotlib is an optional extra: imported only by the drawing modules
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

FORMATS = ("png", "svg", "pdf")
DPI = 150
BOUND = "#000000"


@dataclass(frozen=True)
class Style:
    """How one series is drawn; :meth:`line` gives matplotlib keyword arguments."""

    color: str
    marker: str
    linestyle: str = "-"
    filled: bool = True
    lossy: bool = False

    def line(self) -> dict[str, Any]:
        return {
            "color": self.color,
            "marker": self.marker,
            "linestyle": self.linestyle,
            "markerfacecolor": self.color if self.filled else "white",
            "markeredgecolor": self.color,
        }


_METHODS = {
    "highs": Style("#0072B2", "o"),
    "highs_full": Style("#56B4E9", "D"),
    "cvxpy": Style("#CC79A7", "v"),
    "maxflow": Style("#E69F00", "s"),
    "maxflow_cs": Style("#D55E00", "^"),
    "networkx": Style("#999999", "P"),
    "pot": Style("#8C564B", "X"),
    "global_resolution": Style("#009E73", "*"),
    "partial_resolution": Style("#117733", "h"),
}
_RULES = {
    "sps": Style("#999999", "o"),
    "gumbel": Style("#8C564B", "v"),
    "minhash": Style("#CC79A7", "P"),
    "rrs": Style("#56B4E9", "s"),
    "rrs_without_replacement": Style("#0072B2", "D"),
    "kseq": Style("#E69F00", "^"),
    "spechub": Style("#B8860B", "X"),
    "canonical": Style("#009E73", ">"),
    "ot": Style("#D55E00", "*"),
    "mentored": Style("#7F3C8D", "o", ":", filled=False, lossy=True),
}
_MULTISTEP = {
    "token": Style("#555555", "o"),
    "block": Style("#332288", "s"),
    "gbv": Style("#AA3377", "^"),
    "traversal": Style("#44AA99", "d"),
}
_BOUNDS = {"alpha": Style(BOUND, "", "--"), "lp_optimum": Style(BOUND, "", "--")}
TABLE: dict[str, Style] = {**_METHODS, **_RULES, **_MULTISTEP, **_BOUNDS}
# Names outside the table still keep one colour across runs: a hash picks it.
_SPARE = ("#332288", "#117733", "#882255", "#44AA99", "#AA4499", "#661100", "#6699CC")
_SPARE_MARKERS = ("h", "p", "d", "<", "8")
_VARIANT_LINES = ("-", "--", "-.", ":")


def canonical(name: str) -> str:
    """The table key of a method or rule name: snake_case, old spellings accepted."""
    key = name.strip().lower().replace("-", "_").replace("*", "")
    return {"alpha_star": "alpha", "α": "alpha"}.get(key, key)


def style(name: str) -> Style:
    """The style of a method, rule or bound (``"spectr:kseq"``: the rule's colour, dash-dot)."""
    key = canonical(name)
    if key.startswith("spectr:"):
        return replace(style(key.split(":", 1)[1]), linestyle="-.")
    if key in TABLE:
        return TABLE[key]
    code = zlib.crc32(key.encode())
    return Style(_SPARE[code % len(_SPARE)], _SPARE_MARKERS[code % len(_SPARE_MARKERS)])


def base_name(label: str) -> str:
    """A series label without its variant (``"global_resolution τ=0.001"`` → the method)."""
    return label.split(" ", 1)[0]


def styles(labels: Iterable[str]) -> dict[str, Style]:
    """Styles for the labels of one figure; variants of one name (sorted by label) get their
    own line style and alternate between filled and hollow markers."""
    labels = list(dict.fromkeys(labels))
    out = {}
    for label in labels:
        base = base_name(label)
        variants = sorted(other for other in labels if base_name(other) == base)
        rank = variants.index(label) if len(variants) > 1 else 0
        chosen = style(base)
        if rank:
            chosen = replace(
                chosen, linestyle=_VARIANT_LINES[rank % len(_VARIANT_LINES)], filled=rank % 2 == 0
            )
        out[label] = chosen
    return out


def display(label: str) -> str:
    """Legend text: lossy rules say so."""
    return f"{label} (lossy)" if style(base_name(label)).lossy else label


def add_format_argument(parser: argparse.ArgumentParser, default: str | None = "png") -> None:
    """The ``--format png|svg|pdf`` option of every command that draws figures."""
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default=default,
        help="figure file format"
        + (
            f" (default: {default})"
            if default
            else " (default: the --plot file's suffix, else png)"
        ),
    )


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    return fmt


def figure_path(path: Path, fmt: str | None = None) -> Path:
    """``path`` with the suffix of ``fmt`` (default: its own suffix when that is a known
    format, else png). A known format suffix is replaced, anything else kept and extended
    (``smollm2-skip4-1.0-time`` becomes ``smollm2-skip4-1.0-time.png``)."""
    suffix = path.suffix.lstrip(".").lower()
    known = suffix in FORMATS
    chosen = check_format(fmt) if fmt else (suffix if known else "png")
    stem = path.with_suffix("") if known else path
    return stem.with_name(f"{stem.name}.{chosen}")


def save(fig: Figure, path: Path, fmt: str | None = None) -> Path:
    """Write ``fig`` as png, svg or pdf (see :func:`figure_path`); returns the file written.
    Vector formats carry no timestamp, so reruns produce identical files."""
    out = figure_path(path, fmt)
    metadata: dict[str, Any] = {"png": {"Software": None}, "svg": {"Date": None}}.get(
        out.suffix[1:], {"CreationDate": None}
    )
    fig.savefig(out, dpi=DPI, metadata=metadata)
    return out


def dodge(count: int, width: float = 0.5) -> Sequence[float]:
    """Symmetric offsets for ``count`` series drawn at the same x, within ``width``."""
    if count <= 1:
        return [0.0]
    step = width / (count - 1)
    return [-width / 2 + i * step for i in range(count)]


def legend(fig: Figure, axes: Iterable[Axes], below: bool = True) -> None:
    """One figure legend with every labelled series of ``axes``, each once: under the panels
    (``below``) or to their right."""
    handles: dict[str, Artist] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    if not handles:
        return
    if below:
        fig.legend(
            list(handles.values()),
            list(handles),
            loc="outside lower center",
            fontsize=7,
            ncols=min(len(handles), 4),
        )
    else:
        fig.legend(list(handles.values()), list(handles), loc="outside right center", fontsize=7)


def dots_with_spread(
    ax: Axes,
    xs: Sequence[float],
    centre: Sequence[float],
    low: Sequence[float],
    high: Sequence[float],
    look: Style,
    label: str,
    *,
    ms: float = 5,
    elinewidth: float = 0.8,
) -> None:
    """A dot plot: markers at ``centre`` with bars from ``low`` to ``high`` (the p10-p90
    spread), in the series' fixed style and without connecting lines."""
    ax.errorbar(
        xs,
        centre,
        yerr=[
            [c - lo for c, lo in zip(centre, low, strict=True)],
            [hi - c for c, hi in zip(centre, high, strict=True)],
        ],
        ms=ms,
        capsize=2,
        elinewidth=elinewidth,
        label=label,
        **(look.line() | {"linestyle": "none"}),
    )


def bound_marks(
    ax: Axes,
    xs: Sequence[float],
    values: Sequence[float],
    spreads: Sequence[tuple[float, float] | None],
    width: float,
    label: str,
) -> None:
    """A bound (alpha*) at grouped x positions: a black dashed bar across each group of
    dodged series, its 10th–90th percentile as a grey box behind it."""
    half = width / 2 + 0.08
    for i, (x, value, spread) in enumerate(zip(xs, values, spreads, strict=True)):
        ax.hlines(
            value,
            x - half,
            x + half,
            colors=BOUND,
            linestyles="--",
            linewidth=1.3,
            label=label if i == 0 else "_nolegend_",
            zorder=1,
        )
        if spread is not None:
            ax.fill_between([x - half, x + half], *spread, color=BOUND, alpha=0.07, linewidth=0)
