"""The scalable upper bound on the optimum block efficiency (otlp.multistep.block_efficiency_bound,
docs/optimum.md) on SmolLM2-135M-Instruct with its self-speculative draft, at the first step of
each prompt (the context is the chat-formatted prompt).

Drafting laws: the 2-ary tree of depth 3 ("kary2", gamma = 3) and 2 paths of 4 tokens
("paths2", gamma = 4), children i.i.d. and without replacement, at temperature T. Each bound
expands at most --budget prefixes (target and draft evaluated after each, as tree nodes over
the cached prompt). Prints one markdown row per prompt set and drafting law: the bound's mean
over the prompts (min-max), the prefix-min bound without hit sets, the truncation slack, and
the seconds per bound; with --convergence, the first prompt's bound at several budgets.

    python benchmarks/bench_optimum_bound.py --prompts both --count 4 --budget 64
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from otlp.decoding.models.pair import load_model_pair
from otlp.decoding.prompts import PROMPT_SETS
from otlp.multistep import BlockEfficiencyBound, block_efficiency_bound

LAWS = [
    ("kary2", 3, "iid"),
    ("kary2", 3, "without_replacement"),
    ("paths2", 4, "iid"),
    ("paths2", 4, "without_replacement"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", choices=["free", "grounded", "both"], default="both")
    parser.add_argument("--count", type=int, default=4, help="prompts per set (the first ones)")
    parser.add_argument("--budget", type=int, default=64, help="prefixes expanded per bound")
    parser.add_argument("--batch", type=int, default=32, help="prefixes per model call")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--draft", default="skip4")
    parser.add_argument(
        "--convergence", type=int, nargs="*", default=[], help="budgets for the first prompt"
    )
    args = parser.parse_args()
    start = time.perf_counter()
    pair = load_model_pair("smollm2")
    target, draft = pair(args.temperature, args.draft)
    sets = ["free", "grounded"] if args.prompts == "both" else [args.prompts]
    print("| prompts | law | bound, mean (min-max) | prefix-min | slack | s per bound |")
    print("|---|---|---:|---:|---:|---:|")
    for name in sets:
        contexts = [pair.encode_prompt(text) for text in PROMPT_SETS[name][: args.count]]
        for shape, gamma, scheme in LAWS:
            results: list[BlockEfficiencyBound] = []
            began = time.perf_counter()
            for context in contexts:
                results.append(
                    block_efficiency_bound(
                        target,
                        draft,
                        gamma,
                        shape,
                        scheme,
                        budget=args.budget,
                        batch=args.batch,
                        context=context,
                    )
                )
            seconds = (time.perf_counter() - began) / len(contexts)
            values = np.array([r.block_efficiency for r in results])
            prefix_min = np.mean([r.prefix_min for r in results])
            slack = np.mean([r.slack for r in results])
            law = f"{shape} depth {gamma} {'i.i.d.' if scheme == 'iid' else 'w/o repl.'}"
            print(
                f"| {name} | {law} | {values.mean():.3f} ({values.min():.3f}-{values.max():.3f}) "
                f"| {prefix_min:.3f} | {slack:.3f} | {seconds:.1f} |"
            )
    if args.convergence:
        context = pair.encode_prompt(PROMPT_SETS[sets[0]][0])
        print(f"\nfirst {sets[0]} prompt, kary2 depth 3 i.i.d.:\n")
        print("| budget | bound | prefix-min | slack | s |")
        print("|---:|---:|---:|---:|---:|")
        for budget in args.convergence:
            began = time.perf_counter()
            r = block_efficiency_bound(
                target, draft, 3, "kary2", "iid", budget=budget, batch=args.batch, context=context
            )
            print(
                f"| {budget} | {r.block_efficiency:.4f} | {r.prefix_min:.4f} | {r.slack:.4f} "
                f"| {time.perf_counter() - began:.1f} |"
            )
    print(
        f"\n{time.perf_counter() - start:.0f} s in all (T = {args.temperature}, draft {args.draft})"
    )


if __name__ == "__main__":
    main()
