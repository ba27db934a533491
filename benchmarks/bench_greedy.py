"""alpha* of i.i.d. vs greedy vs without-replacement drafts on SmolLM2 ([GR] Appendix O,
Figures 2-3 layout: n in 2..8, top-k in 10..1000).

Greedy drafts: the top n-1 tokens of the (top-k) draft, the last drawn from the rest. alpha*
is exact for every scheme (subset selection; closed form for greedy). Without replacement is
computed only where its C(k, n) set masses are cheap (n! orders each); elsewhere "—".

    python benchmarks/bench_greedy.py --out benchmarks/results
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

import otlp
import otlp.instances

NS = (2, 3, 4, 5, 6, 7, 8)
KS = (10, 30, 100, 300, 1000)
SCHEMES = ("iid", "greedy", "without_replacement")
WR_BUDGET = 3e5  # C(k, n) * n! terms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draft", default="skip4")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--out", type=Path, default=Path("otlp-results"))
    args = parser.parse_args()
    items = [
        it
        for it in otlp.instances.load("smollm2")
        if it.meta["draft"] == args.draft and it.meta["temperature"] == args.temperature
    ]
    start = time.perf_counter()
    table: dict[str, dict[str, float | None]] = {s: {} for s in SCHEMES}
    for n in NS:
        for k in KS:
            for scheme in SCHEMES:
                if (
                    scheme == "without_replacement"
                    and math.comb(k, n) * math.factorial(n) > WR_BUDGET
                ):
                    table[scheme][f"{n},{k}"] = None
                    continue
                values = [
                    otlp.optimal_acceptance(otlp.Instance(it.p, it.q, n, scheme, k)).alpha_star
                    for it in items
                ]
                table[scheme][f"{n},{k}"] = float(np.mean(values))
    seconds = time.perf_counter() - start
    args.out.mkdir(parents=True, exist_ok=True)
    stem = f"greedy_vs_iid_{args.draft}_T{args.temperature}"
    lines = [
        f"Mean alpha* over {len(items)} SmolLM2 pairs (draft {args.draft}, T = "
        f"{args.temperature}); cells: i.i.d. / greedy / without replacement, and "
        f"i.i.d. - greedy in points; {seconds:.0f} s.",
        "",
        "| n \\ k | " + " | ".join(str(k) for k in KS) + " |",
        "|---|" + "---|" * len(KS),
    ]
    for n in NS:
        cells = []
        for k in KS:
            iid, greedy, wr = (table[s][f"{n},{k}"] for s in SCHEMES)
            wr_txt = "—" if wr is None else f"{wr:.4f}"
            cells.append(f"{iid:.4f} / {greedy:.4f} / {wr_txt} ({100 * (iid - greedy):+.2f})")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    (args.out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    (args.out / f"{stem}.json").write_text(json.dumps({"seconds": seconds, "alpha": table}))
    _plot(table, args.out / f"{stem}.png", args.draft)
    print("\n".join(lines))


def _plot(table: dict, path: Path, draft: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(NS), figsize=(2.2 * len(NS), 2.8), sharey=True)
    for ax, n in zip(axes, NS, strict=True):
        for scheme, style in zip(SCHEMES, ("o-", "s--", "^:"), strict=True):
            pts = [(k, table[scheme][f"{n},{k}"]) for k in KS if table[scheme][f"{n},{k}"]]
            if pts:
                ax.plot(*zip(*pts, strict=True), style, label=scheme, ms=3)
        ax.set_xscale("log")
        ax.set_title(f"n = {n}", fontsize=9)
        ax.set_xlabel("top-k")
    axes[0].set_ylabel("mean alpha*")
    axes[0].legend(fontsize=6)
    fig.suptitle(f"i.i.d. vs greedy vs without-replacement drafts, SmolLM2 ({draft})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


if __name__ == "__main__":
    main()
