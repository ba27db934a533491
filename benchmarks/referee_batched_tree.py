"""The referee's cost on a batched tree sampler: a lossless target-only rule on one-node
chains, vectorised, that sleeps 1 ms a call (an engine's cost on tiny tensors), refereed at the
default settings (60 cases, ε = 0.01) in the statistical mode.

    python benchmarks/referee_batched_tree.py

prints the verdict, its wall clock and the sampler's calls (docs/referee.md quotes them).
"""

from __future__ import annotations

import time

import numpy as np

from otlp.referee import referee


def _draw(p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One token per row of ``p`` (B, V) by inverse CDF."""
    u = rng.random(p.shape[0])
    return np.minimum((np.cumsum(p, axis=1) < u[:, None]).sum(axis=1), p.shape[1] - 1)


class OneMillisecond:
    """Lossless target-only verification of one-node chains, B rows a call, 1 ms a call."""

    protocol, batched, max_children = "tree", True, 1

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, tokens, parents, p, q, rng):  # type: ignore[no-untyped-def]
        self.calls += 1
        time.sleep(0.001)
        first = _draw(p[:, 0], rng)
        hit = first == tokens[:, 0]
        after = _draw(p[:, 1], rng)
        return np.where(hit, 0, -1)[:, None], np.where(hit, after, first)


def main() -> None:
    sampler = OneMillisecond()
    start = time.perf_counter()
    verdict = referee(sampler, cases=60, shapes=("chain1",), mode="statistical")
    print(verdict.summary())
    print(f"wall clock {time.perf_counter() - start:.1f} s, {sampler.calls} calls")


if __name__ == "__main__":
    main()
