"""Cost of otlp.decoding.verify_tree per call and per visited node, every method, one run.

LM-like laws at a real vocabulary size (softmax of scaled Gaussian logits; the draft's
logits are the target's shrunk and perturbed), a batch of B rows, the tree of K paths x L
tokens (SpecHub: 2 paths; block: one chain of L), children drafted with the method's
scheme by ``otlp.decoding.sample_children``. Global resolution's numba kernels are warmed by
one untimed call per method (compile time excluded); timings are medians over ``--reps``
calls.

    python benchmarks/bench_verify_tree.py --out otlp-results
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from otlp.decoding import SCHEMES_OF, chain, children, path_tree, sample_children, verify_tree

# (method, scheme, top_k): global resolution and the exact OT need a top-k draft vocabulary.
CASES = (
    ("sps", "iid", None),
    ("rrs", "iid", None),
    ("kseq", "iid", None),
    ("rrs_without_replacement", "without_replacement", None),
    ("spechub", "spechub", None),
    ("block", "iid", None),
    ("gbv", "iid", None),
    ("gbv", "iid", 100),
    ("global_resolution", "iid", 100),
    ("global_resolution", "without_replacement", 100),
    ("maxflow_cs", "iid", 20),
)


def lm_laws(rng: np.random.Generator, shape: tuple[int, ...], vocab: int):
    logits = rng.standard_normal((*shape, vocab)) * 2.5
    draft_logits = 0.8 * logits + 0.6 * rng.standard_normal((*shape, vocab))
    return _softmax(logits), _softmax(draft_logits)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def drafted(parents, q, scheme, top_k, rng):
    rows = q.shape[0]
    tokens = np.empty((rows, parents.shape[0]), dtype=np.int64)
    for context, kids in enumerate(children(parents)):
        if kids.shape[0]:
            child_scheme = scheme if kids.shape[0] > 1 else "iid"
            tokens[:, kids] = sample_children(
                q[:, context], kids.shape[0], child_scheme, rng, top_k=top_k
            )
    return tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=49152)
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--paths", type=int, default=4)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("otlp-results"))
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    results = []
    for method, scheme, top_k in CASES:
        assert scheme in SCHEMES_OF[method]
        paths = 1 if method == "block" else 2 if scheme == "spechub" else args.paths
        parents = chain(args.depth) if paths == 1 else path_tree(paths, args.depth)
        p, q = lm_laws(rng, (args.rows, parents.shape[0] + 1), args.vocab)
        tokens = drafted(parents, q, scheme, top_k, rng)
        options = {"method": method, "scheme": scheme, "top_k": top_k}
        verify_tree(tokens, parents, p, q, rng=0, **options)  # warm-up (numba)
        times, visited = [], 0
        for rep in range(args.reps):
            start = time.perf_counter()
            result = verify_tree(tokens, parents, p, q, rng=rep + 1, **options)
            times.append(time.perf_counter() - start)
            visited += int(result.num_accepted.sum()) + args.rows
        call = float(np.median(times))
        row = {
            "method": method,
            "scheme": scheme,
            "top_k": top_k,
            "paths": paths,
            "depth": args.depth,
            "rows": args.rows,
            "ms_per_call": 1e3 * call,
            "ms_per_row": 1e3 * call / args.rows,
            "us_per_visited_node": 1e6 * sum(times) / visited,
            "tokens_per_row": visited / (args.reps * args.rows),
        }
        results.append(row)
        print(
            f"{method:24s} {scheme:20s} top_k={top_k!s:5s} K={paths} L={args.depth}: "
            f"{row['ms_per_call']:8.1f} ms/call  {row['ms_per_row']:7.1f} ms/row  "
            f"{row['us_per_visited_node']:8.0f} us/visited node  "
            f"{row['tokens_per_row']:.2f} tokens/row",
            flush=True,
        )
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "verify_tree_cost.json"
    path.write_text(
        json.dumps(
            {"args": {k: str(v) for k, v in vars(args).items()}, "results": results}, indent=1
        )
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
