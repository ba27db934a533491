"""Error of [Musco]'s inner-product sketches against sketch size m on real vectors.

a = p (SmolLM2-135M next-token distribution, top-1000 tokens + the rest), b = q (a
self-speculative draft's distribution over the same tokens). Error = |estimate - <p, q>| /
(||p|| ||q||), median and 90th percentile over pairs x independent sketches. Writes
Markdown, JSON and a PNG (default under otlp-results/; pass --out benchmarks/results).

    python benchmarks/bench_sketch.py --pairs 60 --copies 100
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import otlp.instances
from otlp import sketch

SIZES = (8, 16, 32, 64, 128, 256)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=60)
    parser.add_argument("--copies", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("otlp-results"))
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    suite = otlp.instances.load("smollm2")
    picks = rng.choice(len(suite), size=args.pairs, replace=False)
    start = time.perf_counter()
    errors: dict[str, dict[int, list[float]]] = {k: {m: [] for m in SIZES} for k in sketch.METHODS}
    for idx in picks:
        item = suite.items[int(idx)]
        a, b = item.p, item.q
        scale = float(np.linalg.norm(a) * np.linalg.norm(b))
        for method in sketch.METHODS:
            for m in SIZES:
                est = sketch.estimate_inner_products(method, a, b, m, rng, args.copies)
                errors[method][m] += (np.abs(est - a @ b) / scale).tolist()
    seconds = time.perf_counter() - start
    rows = {
        k: {m: (float(np.median(v)), float(np.quantile(v, 0.9))) for m, v in by_m.items()}
        for k, by_m in errors.items()
    }
    args.out.mkdir(parents=True, exist_ok=True)
    lines = [
        f"Relative error |F - <p, q>| / (||p|| ||q||) on {args.pairs} SmolLM2 pairs x "
        f"{args.copies} sketches each, median (p90); {seconds:.0f} s.",
        "",
        "| method | " + " | ".join(f"m={m}" for m in SIZES) + " |",
        "|---|" + "---|" * len(SIZES),
    ]
    for k, by_m in rows.items():
        cells = " | ".join(f"{med:.3g} ({p90:.3g})" for med, p90 in by_m.values())
        lines.append(f"| {k} | {cells} |")
    (args.out / "sketch.md").write_text("\n".join(lines) + "\n")
    (args.out / "sketch.json").write_text(json.dumps({"seconds": seconds, "rows": rows}))
    _plot(rows, args.out / "sketch.png")
    print("\n".join(lines))


def _plot(rows: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for k, by_m in rows.items():
        ax.plot(SIZES, [by_m[m][0] for m in SIZES], marker="o", label=k)
    ax.plot(SIZES, [np.sqrt(2 / m) for m in SIZES], "k--", lw=0.8, label="sqrt(2/m)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sketch size m")
    ax.set_ylabel("median |error| / (||p|| ||q||)")
    ax.set_title("Inner-product sketches on SmolLM2 next-token distributions")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


if __name__ == "__main__":
    main()
