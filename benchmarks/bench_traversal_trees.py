"""Expected accepted draft tokens per call, exact, of Traversal Verification beside the
token-level tree rules (and block / GBV where they apply) on tiny trees of toy models.

Exact by enumeration (:func:`otlp.verification.tree_exact.call_law`): every drafted tree of
``model_pair("tree", V, seed, distance)`` weighed by its drafting probability. Prints a markdown
table (mean over the seeds, and the range of traversal / token-level per seed).

    python benchmarks/bench_traversal_trees.py --seeds 5
"""

from __future__ import annotations

import argparse

import numpy as np

from otlp.multistep.models import model_pair
from otlp.verification.shapes import chain, k_ary_tree, path_tree
from otlp.verification.tree_exact import call_law

TV = "traversal_verification"
CASES = {  # shape: (parents, the token-level rule first, others, scheme)
    "chain 3": (chain(3), ["sps", "block"], "iid"),
    "2 paths x 2": (path_tree(2, 2), ["rrs", "kseq", "gbv"], "iid"),
    "3 paths x 1": (path_tree(3, 1), ["rrs", "kseq", "gbv"], "iid"),
    "2-ary depth 2": (k_ary_tree((2, 2)), ["rrs", "kseq"], "iid"),
    "3 x 1": (k_ary_tree((3, 1)), ["rrs", "kseq"], "iid"),
    "2-ary depth 2, w/o repl.": (
        k_ary_tree((2, 2)),
        ["rrs_without_replacement"],
        "without_replacement",
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--vocab", type=int, default=3)
    parser.add_argument("--distance", type=float, default=0.6)
    args = parser.parse_args()
    print("| tree | scheme | rule | E[accepted] | traversal / token-level (per seed) |")
    print("| --- | --- | --- | ---: | --- |")
    for name, (parents, rules, scheme) in CASES.items():
        got: dict[str, list[float]] = {rule: [] for rule in [*rules, TV]}
        for seed in range(args.seeds):
            target, draft = model_pair(
                "tree", args.vocab, seed=seed, distance=args.distance, depth=4
            )
            for rule in got:
                got[rule].append(
                    call_law(target, draft, parents, rule, scheme=scheme).expected_accepted
                )
        ratio = np.array(got[TV]) / np.array(got[rules[0]])
        for rule, values in got.items():
            span = f"{ratio.min():.4f} – {ratio.max():.4f}" if rule == TV else ""
            print(f"| {name} | {scheme} | `{rule}` | {np.mean(values):.4f} | {span} |")


if __name__ == "__main__":
    main()
