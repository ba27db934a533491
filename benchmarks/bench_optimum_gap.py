"""How far each tree rule of otlp is from the optimum of every valid verification algorithm
(docs/optimum.md), exactly, on tiny random models: block efficiency (accepted + 1) of the
rule, from otlp.decoding.outcome_law summed over every drafted tree, divided by the optimum
LP's (otlp.multistep.optimal_block_efficiency) for the same drafting law.

Shapes: 2 paths of length 2 ("paths2") and the 2-ary tree of depth 2 ("kary2"), children
drawn i.i.d. or without replacement. Models: otlp.multistep.model_pair("tree", V, seed=s,
distance=D) for s = seed .. seed + count - 1. Prints a markdown table: the mean ratio over the
models (the smallest in parentheses) per rule and shape, and last the scalable upper bound
(otlp.multistep.block_efficiency_bound, untruncated) over the optimum (the largest in
parentheses).

    python benchmarks/bench_optimum_gap.py --count 6 --vocab 3 --distance 0.9
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from otlp.multistep import block_efficiency_bound, model_pair, optimal_block_efficiency, tabulate
from otlp.validate.checks.optimum import TAU, tree_rules
from otlp.verification import rule_block_efficiency
from otlp.verification.rule_table import RULES

GAMMA = 2
COLUMNS = [
    ("paths2", "iid"),
    ("paths2", "without_replacement"),
    ("kary2", "iid"),
    ("kary2", "without_replacement"),
]


def methods_for(shape: str, scheme: str) -> list[str]:
    """The rule table's rules that verify the shape (K paths or a k-ary tree of depth GAMMA)."""
    width = int(shape.removeprefix("paths").removeprefix("kary"))
    if shape.startswith("paths"):
        return tree_rules(scheme, paths=width)
    return tree_rules(scheme, (width,) * GAMMA)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=6, help="random models")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--vocab", type=int, default=3)
    parser.add_argument("--distance", type=float, default=0.9)
    args = parser.parse_args()
    start = time.perf_counter()
    ratios: dict[tuple[str, str, str], list[float]] = {}
    optima: dict[tuple[str, str], list[float]] = {}
    bounds: dict[tuple[str, str], list[float]] = {}
    for seed in range(args.seed, args.seed + args.count):
        target, draft = model_pair(
            "tree", args.vocab, seed=seed, distance=args.distance, depth=GAMMA + 1
        )
        tgt, dft = tabulate(target, GAMMA + 1), tabulate(draft, GAMMA)
        for shape, scheme in COLUMNS:
            best = optimal_block_efficiency(tgt, dft, GAMMA, shape, scheme)
            optima.setdefault((shape, scheme), []).append(best)
            bound = block_efficiency_bound(tgt, dft, GAMMA, shape, scheme).block_efficiency
            bounds.setdefault((shape, scheme), []).append(bound / best)
            for method in methods_for(shape, scheme):
                options = {"tau": TAU} if method == "global_resolution" else {}
                value = rule_block_efficiency(
                    tgt, dft, GAMMA, method, shape=shape, scheme=scheme, **options
                )
                ratios.setdefault((method, shape, scheme), []).append(value / best)
    short = {"iid": "i.i.d.", "without_replacement": "w/o repl."}
    header = [f"{shape} {short[scheme]}" for shape, scheme in COLUMNS]
    print(f"| rule | {' | '.join(header)} |")
    print(f"|---|{'---:|' * len(COLUMNS)}")
    cells = [f"{np.mean(optima[c]):.4f}" for c in COLUMNS]
    print(f"| optimum (block efficiency) | {' | '.join(cells)} |")
    for method in RULES:
        if not any((method, *column) in ratios for column in COLUMNS):
            continue
        row = []
        for shape, scheme in COLUMNS:
            got = ratios.get((method, shape, scheme))
            row.append("" if got is None else f"{np.mean(got):.4f} ({np.min(got):.4f})")
        name = f"{method} (tau = {TAU:g})" if method == "global_resolution" else method
        print(f"| {name} | {' | '.join(row)} |")
    cells = [f"{np.mean(bounds[c]):.4f} ({np.max(bounds[c]):.4f})" for c in COLUMNS]
    print(f"| upper bound (largest) | {' | '.join(cells)} |")
    print(
        f"\n{args.count} models (tree, V = {args.vocab}, distance {args.distance}, seeds "
        f"{args.seed}..{args.seed + args.count - 1}), depth {GAMMA}; "
        f"{time.perf_counter() - start:.0f} s"
    )


if __name__ == "__main__":
    main()
