"""How often the independent-draft certificates hold, and what they cost ([GR] §6, App. S).

For two independent drafts, H* comes from a certified branch and bound and the outer targets
from a certified removal chain (:mod:`otlp.solvers.global_resolution.independent`); where a
certificate fails, the exact QPBO min cut or the outer max-flow is used instead. This counts,
per suite and k, the tokens whose H* search or chain was not certified (the share that needs
the max-flow fallback) and times both steps against the exact methods they replace.

Tokens: every item of the zipf-32k and smollm2 suites (the second draft is the item's draft
at temperature 1.5, ``SuiteItem.draft``), plus ``--random`` Dirichlet triples with ties and
near-one-hot rows at k = 100 and 1,000. Numba is warmed before timing.

    python benchmarks/bench_independent_certificates.py --random 200
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import otlp  # noqa: E402
from otlp.builders import outer_system  # noqa: E402
from otlp.global_resolution.exact import max_flow_values  # noqa: E402
from otlp.instances.suites import load  # noqa: E402
from otlp.solvers.global_resolution.independent import (  # noqa: E402
    chain_blocks,
    independent_outer,
    minimise_psi,
)

Triple = tuple[np.ndarray, np.ndarray, np.ndarray]


def suite_triples(name: str, k: int) -> Iterator[Triple]:
    for item in load(name).items:
        inst = otlp.Instance(item.p, item.draft("independent"), 2, "independent", top_k=k)
        yield inst.p_local, inst.draft_rows[0], inst.draft_rows[1]


def random_triples(count: int, k: int, seed: int) -> Iterator[Triple]:
    rng = np.random.default_rng(seed)
    for i in range(count):
        kind = i % 4
        if kind == 0:
            rows = rng.dirichlet(np.full(k, 0.3), size=3)
        elif kind == 1:  # ties: values on a coarse grid
            rows = np.round(rng.dirichlet(np.ones(k), size=3) * k / 2) + 1.0
        elif kind == 2:  # near-one-hot drafts
            rows = rng.dirichlet(np.full(k, 0.02), size=3) + 1e-12
        else:  # correlated drafts, flat target
            base = rng.dirichlet(np.full(k, 0.5))
            rows = np.stack([np.full(k, 1.0), base, 0.5 * base + 0.5 * rng.dirichlet(np.ones(k))])
        rows = rows / rows.sum(axis=1, keepdims=True)
        target = rows[0] * rng.uniform(0.5, 1.0)  # p sliced to the draft vocabulary
        yield target, rows[1], rows[2]


def measure(triples: Iterator[Triple], exact: int) -> dict[str, float]:
    """Counts and median times; the exact methods on the first ``exact`` tokens."""
    counts = {"tokens": 0, "H not certified": 0, "chain not certified": 0}
    ours, theirs = [], []
    for p, q1, q2 in triples:
        counts["tokens"] += 1
        start = time.perf_counter()
        certified, mask, _ = minimise_psi(p, q1, q2)
        good, order, psi = independent_outer(p, q1, q2, mask)
        chain_blocks(order, p[order], psi, p.shape[0])
        ours.append(time.perf_counter() - start)
        counts["H not certified"] += not certified
        counts["chain not certified"] += certified and not good
        if counts["tokens"] <= exact:  # the target mass outside as one token no draft has
            rest = max(1.0 - p.sum(), 0.0)
            drafts = [np.append(q1, 0.0), np.append(q2, 0.0)]
            inst = otlp.Instance(np.append(p, rest), drafts, 2, "independent", renormalize=True)
            start = time.perf_counter()
            selection = otlp.optimal_acceptance(inst, method="mincut")
            max_flow_values(outer_system(inst, selection.H_mask))
            theirs.append(time.perf_counter() - start)
    counts["ours median ms"] = 1e3 * float(np.median(ours))
    counts["exact median ms"] = 1e3 * float(np.median(theirs)) if theirs else float("nan")
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random", type=int, default=200, help="random triples per k")
    parser.add_argument("--exact", type=int, default=5, help="tokens timed with max-flow")
    args = parser.parse_args()
    warm = next(random_triples(1, 20, 0))
    minimise_psi(*warm)
    rows = []
    for k in (100, 1000):
        for name in ("zipf-32k", "smollm2"):
            rows.append((name, k, measure(suite_triples(name, k), args.exact)))
        rows.append((f"random x{args.random}", k, measure(random_triples(args.random, k, k), 0)))
    print(
        "| tokens | k | count | H* not certified | chain not certified | certified ms | "
        "QPBO + outer max-flow ms |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, k, c in rows:
        print(
            f"| {name} | {k} | {c['tokens']} | {c['H not certified']} | "
            f"{c['chain not certified']} | {c['ours median ms']:.3f} | {c['exact median ms']:.1f} |"
        )


if __name__ == "__main__":
    main()
