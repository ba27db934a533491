"""[SpecHub] Table 4 (toy experiments, V = 50, two drafts, 100 pairs per cell) against otlp's
exact acceptances, for each reading of Appendix E's generator.

RRS and SpecHub: exact closed forms; RRSw: exact (the paper used 1000-run Monte Carlo);
OTM / OTMw: alpha* of i.i.d. / without-replacement drafts. Each cell's expected value under a
reading is estimated from --pairs pairs (default 1000); z = (paper - expected) / (standard
deviation over pairs / sqrt(100)): how many standard errors of the paper's own 100-pair mean
the printed number lies from what the reading predicts.

    python benchmarks/bench_table4.py --out benchmarks/results
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import otlp
from otlp import rules
from otlp.instances.generators import spechub_toy_pair

COLUMNS = ("RRS", "RRSw", "OTM", "OTMw", "SpecHub")
TABLE_4 = {  # (T, lambda): RRS, RRSw, OTM, OTMw, SpecHub as printed
    (0.1, 0.7): (0.6273, 0.7120, 0.6380, 0.7345, 0.7402),
    (0.1, 0.5): (0.3323, 0.4057, 0.3346, 0.4125, 0.4123),
    (0.25, 0.7): (0.7354, 0.7653, 0.7846, 0.8321, 0.8113),
    (0.25, 0.5): (0.4564, 0.4978, 0.4743, 0.5245, 0.4968),
    (0.5, 0.7): (0.8090, 0.8122, 0.9037, 0.9150, 0.8500),
    (0.5, 0.5): (0.6456, 0.6593, 0.7052, 0.7206, 0.6403),
}


def acceptances(p: np.ndarray, q: np.ndarray) -> list[float]:
    iid, wr = otlp.Instance(p, q, 2), otlp.Instance(p, q, 2, "without_replacement")
    return [
        rules.get("rrs").acceptance(iid),
        rules.get("rrs-without-replacement").acceptance(iid),
        otlp.optimal_acceptance(iid).alpha_star,
        otlp.optimal_acceptance(wr).alpha_star,
        rules.get("spechub").acceptance(iid),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=Path("otlp-results"))
    args = parser.parse_args()
    start = time.perf_counter()
    lines, summary = [], {}
    for logits in ("normal", "uniform"):
        lines += [
            f"**Logits {logits}** — expected (paper) z per cell, {args.pairs} pairs per cell:",
            "",
            "| T | lambda | " + " | ".join(COLUMNS) + " |",
            "|---|---|" + "---|" * len(COLUMNS),
        ]
        errors, zs = [], []
        for (t, lam), paper in TABLE_4.items():
            rows = np.array(
                [
                    acceptances(*spechub_toy_pair(50, t, lam, seed, logits=logits))
                    for seed in range(args.pairs)
                ]
            )
            mean = rows.mean(axis=0)
            se = np.maximum(rows.std(axis=0, ddof=1), 1e-12) / np.sqrt(100)
            z = (np.array(paper) - mean) / se
            errors += list(np.abs(mean - paper))
            zs += list(z)
            cells = " | ".join(
                f"{m:.4f} ({p:.4f}) {zz:+.1f}" for m, p, zz in zip(mean, paper, z, strict=True)
            )
            lines.append(f"| {t} | {lam} | {cells} |")
        zs_arr = np.abs(np.array(zs))
        summary[logits] = {
            "mean_abs_error": float(np.mean(errors)),
            "max_abs_error": float(np.max(errors)),
            "max_abs_z": float(zs_arr.max()),
            "share_abs_z_below_2": float((zs_arr < 2).mean()),
        }
        s = summary[logits]
        lines += [
            "",
            f"mean |error| {s['mean_abs_error']:.4f}, max |error| {s['max_abs_error']:.4f}, "
            f"max |z| {s['max_abs_z']:.1f}, "
            f"cells with |z| < 2: {100 * s['share_abs_z_below_2']:.0f}%",
            "",
        ]
    seconds = time.perf_counter() - start
    lines.append(f"{seconds:.0f} s.")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "spechub_table4.md").write_text("\n".join(lines) + "\n")
    (args.out / "spechub_table4.json").write_text(json.dumps({"seconds": seconds, **summary}))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
