"""Every tree rule beside the scalable bound on the optimum, at the first step of each prompt.

For each prompt (the first --count of each set; the chat-formatted prompt is the context),
each drafting law (2-ary tree of depth 3, 2 paths of 4 tokens, children i.i.d. or without
replacement; a chain of 4 tokens) and each rule of the rule table that verifies it: the block
efficiency of one verification call at the prompt (otlp.decoding.first_step: --samples trees
drafted once, each verified --repeats times by every rule with the same seeds), and the upper
bound on any lossless rule's (otlp.multistep.block_efficiency_bound, at most --budget
prefixes) for the same drafting law at the same context. Target and draft are memoised by
prefix (otlp.decoding.models.memo), and the bound reads the same memo.

--top-k K drafts from the draft's top K tokens and verifies with top_k = K (the decode loop's
setting for partial and global resolution on SmolLM2); the bound is computed for that
drafting law. Prints, per prompt set, each rule's mean over the prompts +- its standard error
(and the bound's mean), the paired difference of Traversal Verification from each per-node
optimal transport rule, and the largest excess of a rule over the bound in standard
errors over every (prompt, law, rule). --model toy runs the toy Markov pair of
`otlp decode --model toy` (prompts: the single tokens 0 .. count - 1).

    python benchmarks/bench_first_step.py --prompts free --count 4 --samples 300 --top-k 100
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from otlp.decoding.first_step import FirstStep, measure_first_step
from otlp.decoding.models.base import TreeModel
from otlp.decoding.models.memo import MemoizedTreeLM
from otlp.decoding.prompts import PROMPT_SETS
from otlp.multistep import block_efficiency_bound
from otlp.verification.rule_table import RULES
from otlp.verification.shapes import k_ary_tree, path_tree

LAWS = {  # label -> (shape, gamma, scheme)
    "kary2 iid": ("kary2", 3, "iid"),
    "kary2 w/o repl.": ("kary2", 3, "without_replacement"),
    "paths2 iid": ("paths2", 4, "iid"),
    "paths2 w/o repl.": ("paths2", 4, "without_replacement"),
    "chain": ("paths1", 4, "iid"),  # one path: block verification, HSD; the bound is the optimum
}
OT_RULES = ("partial_resolution", "maxflow_cs", "global_resolution")  # per-node OT
TRAVERSAL = "traversal_verification"


@dataclass
class Cell:
    """One (prompt, law): the rules' estimates and the bound."""

    result: FirstStep
    bound: float


def rules_for(shape: str, scheme: str) -> list[str]:
    """The table's rules that verify ``shape`` with children drafted by ``scheme``."""
    width = int(shape[5:]) if shape.startswith("paths") else 0
    branching = () if width else (int(shape[4:]),) * 3
    return [
        name
        for name, rule in RULES.items()
        if scheme in rule.schemes and rule.verifies(width or 1, branching)
    ]


def parents_of(shape: str, gamma: int) -> np.ndarray:
    if shape.startswith("paths"):
        return path_tree(int(shape[5:]), gamma)
    return k_ary_tree((int(shape[4:]),) * gamma)


def models(args: argparse.Namespace) -> tuple[TreeModel, TreeModel, dict[str, list[list[int]]]]:
    """Target, draft and the prompts per set."""
    sets = ["free", "grounded"] if args.prompts == "both" else [args.prompts]
    if args.model == "toy":
        from otlp.decoding.models.prefix import PrefixLM
        from otlp.multistep.models import model_pair

        target, draft = model_pair("markov", args.vocab, seed=args.seed, distance=args.distance)
        tokens = [[i % args.vocab] for i in range(args.count)]
        return (
            PrefixLM(target, temperature=args.temperature, name="toy target"),
            PrefixLM(draft, temperature=args.temperature, name="toy draft"),
            {"toy": tokens},
        )
    import torch

    from otlp.decoding.models.pair import load_model_pair

    torch.set_num_threads(1)
    pair = load_model_pair("smollm2")
    target, draft = pair(args.temperature, args.draft)
    prompts = {s: [pair.encode_prompt(t) for t in PROMPT_SETS[s][: args.count]] for s in sets}
    return target, draft, prompts


def pooled(values: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """The mean over prompts of (mean, se) pairs and its standard error."""
    means = np.array([m for m, _ in values])
    ses = np.array([s for _, s in values])
    return float(means.mean()), float(np.sqrt((ses**2).sum()) / len(values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=["smollm2", "toy"], default="smollm2")
    parser.add_argument("--prompts", choices=["free", "grounded", "both"], default="both")
    parser.add_argument("--count", type=int, default=4, help="prompts per set (the first ones)")
    parser.add_argument("--laws", default=",".join(LAWS), help=f"of: {', '.join(LAWS)}")
    parser.add_argument("--samples", type=int, default=200, help="drafted trees per cell")
    parser.add_argument("--chunk", type=int, default=32, help="trees per model call")
    parser.add_argument("--repeats", type=int, default=8, help="verifications of each tree")
    parser.add_argument("--top-k", type=int, default=None, help="draft's top k (none: all)")
    parser.add_argument("--tau", type=float, default=None, help="global resolution's tau")
    parser.add_argument("--budget", type=int, default=128, help="prefixes expanded per bound")
    parser.add_argument("--batch", type=int, default=32, help="prefixes per bound model call")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--draft", default="skip4")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--vocab", type=int, default=8, help="--model toy: vocabulary")
    parser.add_argument("--distance", type=float, default=0.5, help="--model toy: draft distance")
    args = parser.parse_args()
    laws = [label.strip() for label in args.laws.split(",")]
    unknown = [label for label in laws if label not in LAWS]
    if unknown:
        parser.error(f"--laws: unknown {', '.join(unknown)}")
    start = time.perf_counter()
    target, draft, prompts = models(args)
    tgt = MemoizedTreeLM(target)
    dft = MemoizedTreeLM(draft, top_k=args.top_k)
    table: dict[tuple[str, str], list[Cell]] = {}
    for name, contexts in prompts.items():
        for label in laws:
            shape, gamma, scheme = LAWS[label]
            methods = rules_for(shape, scheme)
            parents = parents_of(shape, gamma)
            for i, context in enumerate(contexts):
                began = time.perf_counter()
                result = measure_first_step(
                    tgt, dft, context, parents, methods, scheme=scheme,
                    samples=args.samples, top_k=args.top_k, tau=args.tau, chunk=args.chunk,
                    repeats=args.repeats, seed=args.seed,
                )  # fmt: skip
                measured = time.perf_counter() - began
                bound = block_efficiency_bound(
                    tgt, dft, gamma, shape, scheme, budget=args.budget, batch=args.batch,
                    context=context,
                ).block_efficiency  # fmt: skip
                table.setdefault((name, label), []).append(Cell(result, bound))
                print(
                    f"{name} {i} {label}: {measured:.0f} s rules, "
                    f"{time.perf_counter() - began - measured:.0f} s bound, "
                    f"{time.perf_counter() - start:.0f} s in all",
                    file=sys.stderr,
                    flush=True,
                )
    report(table, prompts, laws)
    top = "the whole vocabulary" if args.top_k is None else f"top {args.top_k}"
    pair = f"toy V = {args.vocab}" if args.model == "toy" else f"smollm2, draft {args.draft}"
    print(
        f"\n{time.perf_counter() - start:.0f} s in all ({pair}, T = {args.temperature}, "
        f"drafting from {top}, {args.samples} trees per prompt and law verified "
        f"{args.repeats} times each, bound budget "
        f"{args.budget}; target {tgt.evaluated} laws in {tgt.calls} calls, draft "
        f"{dft.evaluated} in {dft.calls})"
    )


def report(
    table: dict[tuple[str, str], list[Cell]], prompts: dict[str, list[list[int]]], laws: list[str]
) -> None:
    """The markdown tables (see the module docstring)."""
    for name in prompts:
        cells = {label: table[(name, label)] for label in laws}
        print(f"\n{name} prompts ({len(prompts[name])}): block efficiency, mean ± s.e.\n")
        print("| rule | " + " | ".join(laws) + " |")
        print("|---|" + "---:|" * len(laws))
        for method in RULES:
            row = [_estimate(cells[label], method) for label in laws]
            if any(row):
                _line(method, row)
        bounds = [float(np.mean([c.bound for c in cells[label]])) for label in laws]
        _line("upper bound (any lossless rule)", [f"{b:.3f}" for b in bounds])
        best = [
            max(np.mean([c.result.mean(m) for c in cells[label]]) for m in _measured(cells[label]))
            for label in laws
        ]
        _line("best rule / bound", [f"{b / u:.1%}" for b, u in zip(best, bounds, strict=True)])
        for ot in OT_RULES:
            gains = [_traversal_gain(cells[label], ot) for label in laws]
            if any(gains):
                _line(f"traversal − {ot} (paired)", gains)
    worst = max(
        ((c.result.mean(m) - c.bound) / max(c.result.se(m), 1e-12), key, m)
        for key, cs in table.items()
        for c in cs
        for m in c.result.emitted
    )
    print(
        f"\nlargest excess over the bound: {worst[0]:+.1f} s.e. ({worst[2]}, "
        f"{worst[1][0]} prompts, {worst[1][1]})"
    )


def _line(name: str, values: list[str]) -> None:
    print(f"| {name} | " + " | ".join(values) + " |")


def _measured(cells: list[Cell]) -> list[str]:
    """The rules measured on every prompt of ``cells``."""
    return [m for m in cells[0].result.emitted if all(m in c.result.emitted for c in cells)]


def _estimate(cells: list[Cell], method: str) -> str:
    """``method``'s mean over the prompts ± its s.e., "refused", or blank (not run)."""
    if method in _measured(cells):
        m, s = pooled([(c.result.mean(method), c.result.se(method)) for c in cells])
        return f"{m:.3f} ± {s:.3f}"
    return "refused" if any(method in c.result.refused for c in cells) else ""


def _traversal_gain(cells: list[Cell], ot: str) -> str:
    """Traversal Verification minus the per-node OT rule ``ot``, paired over the same trees."""
    if ot not in _measured(cells) or TRAVERSAL not in _measured(cells):
        return ""
    m, s = pooled([c.result.difference(TRAVERSAL, ot) for c in cells])
    return f"{m:+.3f} ± {s:.3f}"


if __name__ == "__main__":
    main()
