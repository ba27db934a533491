"""Seconds per call of every method and rule on small vocabularies with many drafts (issue 9:
V = 3, n = 12 took 35 s and V = 8, n = 10 over 60 s). Libraries are imported and numba is
warmed up first (excluded); each cell is one call on a fresh instance (no cached columns).

    python benchmarks/small_vocab_timing.py
"""

from __future__ import annotations

import contextlib
import time
import warnings

import numpy as np

import otlp
import otlp.rules

CASES = [(3, 12, "iid"), (8, 10, "iid"), (10, 10, "without_replacement"), (8, 10, "independent")]


def _instance(vocab: int, n: int, scheme: str) -> otlp.Instance:
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.ones(vocab)), rng.dirichlet(np.ones(vocab))
    rows = [rng.dirichlet(np.ones(vocab)) for _ in range(n)] if scheme == "independent" else q
    return otlp.Instance(p, rows, n, scheme)


def _run(component: str, inst: otlp.Instance) -> str:
    kind, name = component.split(":")
    if kind == "method":
        plan = otlp.solve(inst, name)
        return plan.status
    rule = otlp.rules.get(name)
    rule.acceptance(inst)
    rule.output_distribution(inst)
    rule.sample(inst, 0, 10)
    return "ok"


def main() -> None:
    warnings.simplefilter("ignore")
    components = [f"method:{m}" for m in otlp.method_names()]
    components += [f"rule:{r}" for r in otlp.rules.names()]
    for component in components:  # warm-up: imports, numba compile
        with contextlib.suppress(ValueError):  # not applicable here
            _run(component, _instance(3, 2, "iid"))
    print("| V | n | scheme | component | seconds | result |")
    print("|---|---|---|---|---|---|")
    for vocab, n, scheme in CASES:
        for component in components:
            inst = _instance(vocab, n, scheme)
            start = time.perf_counter()
            try:
                result = _run(component, inst)
            except ValueError as exc:
                result = f"refused: {str(exc)[:60]}"
            print(
                f"| {vocab} | {n} | {scheme} | {component} | "
                f"{time.perf_counter() - start:.3f} | {result} |"
            )


if __name__ == "__main__":
    main()
