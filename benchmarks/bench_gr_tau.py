"""Per-token cost of global resolution in tau on a peaked pair ([GR] §6; issue reproducer).

i.i.d. drafts, V = k = 5,000, n = 8: target and draft are softmaxes of correlated N(0, 9)
logits at temperature 0.1 (q max 0.99); omega is n copies of the draft's top token. Each
tau is timed side by side, one token per call, through the object API on a prebuilt
Instance (``otlp.solve(inst, "global_resolution")`` + ``plan.sample``) and through the fused
batched call on the full arrays (``otlp.verify_drafts``); the best of ``--repeats`` calls,
numba warmed up first (compile excluded), BLAS pinned to one thread.

    python benchmarks/bench_gr_tau.py
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

import otlp
from otlp.instances.generators import softmax

TAUS = (1e-3, 1e-4, 1e-6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=5000)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(2)
    logits = rng.normal(0.0, 3.0, args.vocab)
    p = softmax(logits / 0.1)
    q = softmax((0.8 * logits + 0.2 * rng.normal(0.0, 3.0, args.vocab)) / 0.1)
    omega = np.full(args.n, int(np.argmax(q)))
    inst = otlp.Instance(p, q, args.n)

    def object_api(tau: float) -> tuple[float, str]:
        plan = otlp.solve(inst, "global_resolution", tau=tau, check=False)
        plan.sample(omega, rng)
        report = plan.token_reports[-1]
        return report.seconds, f"{report.system} {report.variables} vars, {report.iterations} it"

    def fused(tau: float) -> tuple[float, str]:
        row = otlp.verify_drafts(
            p, q, omega[None], method="global_resolution", tau=tau, rng=rng
        ).reports[0]
        return 0.0, f"{row.system} {row.variables} vars, {row.iterations} it"

    object_api(1e-3), fused(1e-3)  # warm-up: numba compile and first imports
    print(f"q max {q.max():.3f}; V = k = {args.vocab}, n = {args.n}; best of {args.repeats}")
    print("| tau | object API s | verify_drafts s | object API unit | fused unit |")
    print("| --- | --- | --- | --- | --- |")
    for tau in TAUS:
        times, notes = {}, {}
        for name, call in (("object", object_api), ("fused", fused)):
            best = np.inf
            for _ in range(args.repeats):
                start = time.perf_counter()
                notes[name] = call(tau)[1]
                best = min(best, time.perf_counter() - start)
            times[name] = best
        print(
            f"| {tau:g} | {times['object']:.3f} | {times['fused']:.3f} | {notes['object']} | "
            f"{notes['fused']} |"
        )


if __name__ == "__main__":
    main()
