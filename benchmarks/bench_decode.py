"""End-to-end decoder cost per token: full-vocabulary (p, q) arrays and drafts to the token.

Side by side on the same tokens (medians, ms): the floors (``np.argpartition`` over V alone;
single-draft speculative sampling in numpy), global resolution through ``otlp.verify_drafts``
(B = 1, the fused compiled path), the object API (``Instance`` + ``solve`` + ``sample``),
``maxflow_cs`` and HiGHS through the object API; then batched throughput (B = 64, tokens/s),
serial and ``parallel=True``. Numba warmed up first (compile excluded); BLAS and numba
threads pinned to 1 except for the parallel row (2 threads).

    python benchmarks/bench_decode.py --tokens 30
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from functools import partial  # noqa: E402
from pathlib import Path  # noqa: E402

import numba  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import otlp  # noqa: E402
from instances import zipf_llm_pair  # noqa: E402


def sps_numpy(p: np.ndarray, q: np.ndarray, draft: int, rng: np.random.Generator) -> int:
    """Single-draft speculative sampling over the full vocabulary (the numpy floor)."""
    if rng.random() * q[draft] < p[draft]:
        return draft
    left = np.maximum(p - q, 0.0)
    return int(np.searchsorted(np.cumsum(left), rng.random() * left.sum(), side="right"))


def _argpartition(p, q, drafts, k, n, rng):
    return np.argpartition(q, -k)[-k:]


def _sps(p, q, drafts, k, n, rng):
    return sps_numpy(p, q, int(drafts[0, 0]), rng)


def _fused(p, q, drafts, k, n, rng):
    return otlp.verify_drafts(p, q, drafts, top_k=k, rng=rng)


def _object(method: str):
    def solve(p, q, drafts, k, n, rng):
        plan = otlp.solve(otlp.Instance(p, q, n, top_k=k), method, check=False)
        return plan.sample(drafts[0], rng)

    return solve


CELLS = {
    "argpartition floor": _argpartition,
    "SpS numpy floor": _sps,
    "G.R. verify_drafts": _fused,
    "G.R. object API": _object("global_resolution"),
    "maxflow_cs": _object("maxflow-cs"),
    "HiGHS": _object("highs"),
}


def suite(name: str, count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    if name == "smollm2":
        from instances.realmodel.load import load_smollm2

        items = [it for it in load_smollm2() if it["meta"]["temperature"] == 1.0]
        picks = np.linspace(0, len(items) - 1, min(count, len(items))).astype(int)
        return [(np.asarray(items[i]["p"]), np.asarray(items[i]["q"])) for i in picks]
    vocab = int(name.split("-")[1])
    return [zipf_llm_pair(vocab, similarity=(0.5, 0.7, 0.9)[i % 3], seed=i) for i in range(count)]


def median_ms(fn: Callable[[], object], repeats: int = 3) -> float:
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return 1e3 * best


def run(name: str, k: int, n: int, tokens: int, exact_tokens: int) -> None:
    rng = np.random.default_rng(0)
    pairs = suite(name, tokens)
    times: dict[str, list[float]] = {}
    fallbacks = 0
    for index, (p, q) in enumerate(pairs):
        inst = otlp.Instance(p, q, n, top_k=k)
        drafts = inst.sample_drafts(rng, 1)
        args = (p, q, drafts, k, n, rng)
        labels = list(CELLS) if index < exact_tokens else list(CELLS)[:4]
        for label in labels:
            if label == "HiGHS" and k > 100:
                continue
            fn = partial(CELLS[label], *args)
            times.setdefault(label, []).append(median_ms(fn, 1 if label == "HiGHS" else 3))
        fallbacks += otlp.verify_drafts(p, q, drafts, top_k=k, rng=1).fallbacks
    gr = np.median(times["G.R. verify_drafts"])
    print(f"\n{name} (k, n) = ({k}, {n}), {len(pairs)} tokens, GR fallbacks {fallbacks}")
    for label, values in times.items():
        med = float(np.median(values))
        spread = f"[{np.quantile(values, 0.1):.3f}, {np.quantile(values, 0.9):.3f}]"
        print(f"  {label:22s} {med:9.3f} ms {spread:22s} x GR: {med / gr:8.1f} ({len(values)} tok)")
    batch = 64
    p_rows = np.array([pairs[i % len(pairs)][0] for i in range(batch)])
    q_rows = np.array([pairs[i % len(pairs)][1] for i in range(batch)])
    drafts = np.vstack(
        [
            otlp.Instance(p_rows[b], q_rows[b], n, top_k=k).sample_drafts(rng, 1)
            for b in range(batch)
        ]
    )
    for parallel in (False, True):
        numba.set_num_threads(2 if parallel else 1)
        fn = partial(
            otlp.verify_drafts, p_rows, q_rows, drafts, top_k=k, rng=rng, parallel=parallel
        )
        ms = median_ms(fn, 5)
        print(f"  batched B={batch} parallel={parallel}: {batch / ms * 1e3:,.0f} tokens/s")
    numba.set_num_threads(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=30)
    parser.add_argument("--exact-tokens", type=int, default=5)
    parser.add_argument("--suites", nargs="+", default=["zipf-32000", "zipf-128256", "smollm2"])
    parser.add_argument("--kn", nargs="+", default=["100,2", "1000,2"])
    args = parser.parse_args()
    numba.set_num_threads(1)
    p, q = zipf_llm_pair(500, seed=1)
    for parallel in (False, True):  # warm-up: compile or load every kernel
        drafts = otlp.Instance(p, q, 2, top_k=50).sample_drafts(np.random.default_rng(0), 4)
        otlp.verify_drafts(p, q, drafts, top_k=50, parallel=parallel)
    otlp.solve(otlp.Instance(p, q, 2, top_k=50), "global_resolution").sample(
        drafts[0], np.random.default_rng(0)
    )
    for name in args.suites:
        for kn in args.kn:
            k, n = (int(x) for x in kn.split(","))
            run(name, k, n, args.tokens, args.exact_tokens)


if __name__ == "__main__":
    main()
