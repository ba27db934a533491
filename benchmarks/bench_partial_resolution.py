"""Per-token time of verify_drafts: partial resolution (exact) beside global resolution.

Full-vocabulary float32 rows at V = 32,000 (a Zipf target, a log-normal perturbation as the
draft), one row per call, rounds interleaved; numba kernels are warmed (compiled or loaded
from the cache) before any timing. Prints median and spread per (method, k, n).

    PYTHONPATH=. python benchmarks/bench_partial_resolution.py [rounds]
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

import otlp

VOCAB = 32_000
CELLS = ((100, 2), (1000, 2), (VOCAB, 8))
METHODS = ("global_resolution", "partial_resolution")


def rows(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = rng.permutation(np.arange(1, VOCAB + 1) ** -1.1)
    q = p * np.exp(rng.normal(0.0, 1.0, VOCAB))
    return (p / p.sum()).astype(np.float32)[None, :], (q / q.sum()).astype(np.float32)[None, :]


def one(method: str, k: int, n: int, seed: int) -> float:
    p, q = rows(seed)
    top_k = None if k == VOCAB else k
    drafts = otlp.Instance(p[0], q[0], n, top_k=top_k, renormalize=True).sample_drafts(seed, 1)
    start = time.perf_counter()
    otlp.verify_drafts(p, q, drafts, method=method, top_k=top_k, rng=seed)
    return time.perf_counter() - start


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    for k, n in CELLS:  # warm-up: compile / load every kernel on this cell's shapes
        for method in METHODS:
            one(method, k, n, 0)
    for k, n in CELLS:
        times: dict[str, list[float]] = {m: [] for m in METHODS}
        for r in range(rounds):
            for method in METHODS:  # interleaved rounds
                times[method].append(one(method, k, n, 1 + r))
        for method in METHODS:
            t = np.array(times[method]) * 1e3
            print(
                f"k={k:>6} n={n}  {method:<19} median {np.median(t):9.2f} ms  "
                f"min {t.min():9.2f}  max {t.max():9.2f}  ({rounds} rounds)"
            )


if __name__ == "__main__":
    main()
