"""How far GBV is from the optimal valid K-path verification ([GBV] Theorem 4.6) on random
tiny trees, exactly: expected accepted tokens E[tau] of GBV (best of its two tree-based
rankings), of the best greedy ranking (every global ranking enumerated up to 6 paths, 2000
sampled for 9), and of Theorem 4.6's
optimum (path selection + block verification, an exact LP; equal to the antichain LP).

Instances: model kinds tree / markov / context-free, V in {2, 3}, L in {1, 2} (V**L <= 9
paths), K in {2, 3}, draft distance in {0.3, 0.6, 0.9}. Prints a markdown summary to stdout.

    python benchmarks/bench_gbv_optimal.py --count 200 --seed 0
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

from otlp.multistep import RANKINGS, expected_accepted, model_pair, tabulate
from otlp.multistep.gbv import skewed_law
from otlp.multistep.optimal import optimal_path_selection, skewed_objective

EXHAUSTIVE = 6  # paths up to which every global ranking is tried
SAMPLED = 2000  # random global rankings tried beyond that


def one_instance(rng: np.random.Generator) -> tuple[float, float, float]:
    """(GBV, best greedy ranking, Theorem 4.6 optimum) E[tau] on one random tiny tree."""
    vocab, gamma = int(rng.integers(2, 4)), int(rng.integers(1, 3))
    paths = int(rng.integers(2, 4))
    kind = str(rng.choice(["tree", "markov", "context-free"]))
    distance = float(rng.choice([0.3, 0.6, 0.9]))
    target, draft = model_pair(
        kind, vocab, seed=int(rng.integers(10**6)), distance=distance, depth=gamma + 1
    )
    tgt, dft = tabulate(target, gamma + 1), tabulate(draft, gamma)
    gbv = max(expected_accepted(tgt, dft, gamma, "gbv", paths, ranking=r) for r in RANKINGS)
    mass = dft.joint(gamma)
    count = mass.shape[0]
    if count <= EXHAUSTIVE:
        orders = map(np.array, itertools.permutations(range(count)))
    else:
        orders = (rng.permutation(count) for _ in range(SAMPLED))
    greedy = max(skewed_objective(tgt, skewed_law(mass, order, paths), gamma) for order in orders)
    greedy = max(greedy, gbv)  # GBV's tree-based rankings are global rankings too
    optimum = optimal_path_selection(tgt, dft, gamma, paths).expected_accepted
    return gbv, greedy, optimum


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=200, help="random tiny trees")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    rows = np.array([one_instance(rng) for _ in range(args.count)])
    gbv, greedy, optimum = rows.T
    ratio, best_ratio = gbv / optimum, greedy / optimum
    print(f"{args.count} random tiny trees (seed {args.seed}), E[tau] per target call:\n")
    print("| | GBV | best greedy ranking | Thm 4.6 optimum |")
    print("|---|---|---|---|")
    print(f"| mean E[tau] | {gbv.mean():.4f} | {greedy.mean():.4f} | {optimum.mean():.4f} |")
    print(f"| mean ratio to optimum | {ratio.mean():.4f} | {best_ratio.mean():.4f} | 1 |")
    eff = (gbv + 1) / (optimum + 1), (greedy + 1) / (optimum + 1)
    print(f"| mean block-efficiency ratio | {eff[0].mean():.4f} | {eff[1].mean():.4f} | 1 |")
    print(f"| worst ratio | {ratio.min():.4f} | {best_ratio.min():.4f} | 1 |")
    print(
        f"| optimal (within 1e-9) | {np.mean(optimum - gbv <= 1e-9):.0%} "
        f"| {np.mean(optimum - greedy <= 1e-9):.0%} | 100% |"
    )
    print(f"\n{time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
