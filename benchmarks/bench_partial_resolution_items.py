"""Per-token time of verify_drafts on the zipf-32k items: partial resolution beside global
resolution (tau = 1e-3, its default), B = 1 and B = 64 equal rows.

Items 0-11 of ``zipf-32k`` (float64 rows, V = 32,000) at (k, n) = (100, 2) and (1000, 2),
drafts of seeds 0-2; B = 64 tiles the item's (p, q) into 64 rows with 64 drafted tuples (as
``otlp bench`` does). Each call is timed 5 times after one untimed call (numba warm) and its
best kept; the two methods alternate on the same inputs in one process. Prints the median,
p90 and max over the 36 tokens of the time per token, and tokens/s at the median.

    PYTHONPATH=. python benchmarks/bench_partial_resolution_items.py
"""

from __future__ import annotations

import time

import numpy as np

import otlp
from otlp.instances.suites import load

METHODS = ("partial_resolution", "global_resolution")


def best(method: str, p: np.ndarray, q: np.ndarray, drafts: np.ndarray, k: int, seed: int) -> float:
    """The best of 5 timed calls after an untimed one."""
    otlp.verify_drafts(p, q, drafts, method=method, top_k=k, rng=seed)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        otlp.verify_drafts(p, q, drafts, method=method, top_k=k, rng=seed)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    items = load("zipf-32k").items
    n = 2
    for k in (100, 1000):
        for rows in (1, 64):
            times: dict[str, list[float]] = {m: [] for m in METHODS}
            for item in items:
                p, q = np.asarray(item.p), np.asarray(item.q)
                inst = otlp.Instance(p, q, n, top_k=k)
                tiled_p, tiled_q = np.tile(p, (rows, 1)), np.tile(q, (rows, 1))
                for seed in range(3):
                    drafts = inst.sample_drafts(np.random.default_rng(seed), rows)
                    for method in METHODS:
                        spent = best(method, tiled_p, tiled_q, drafts, k, seed)
                        times[method].append(spent / rows)
            for method in METHODS:
                t = np.array(times[method]) * 1e3
                print(
                    f"(k={k}, n={n}) B={rows:2d} {method:<19} median {np.median(t):.3f} ms/token"
                    f"  p90 {np.percentile(t, 90):.3f}  max {t.max():.3f}"
                    f"  {1e3 / np.median(t):,.0f} tokens/s"
                )


if __name__ == "__main__":
    main()
