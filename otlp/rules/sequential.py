"""Sequential verification: try candidates in order, each accepted with its own probability,
and draw from a final residual if all are rejected.

Recursive rejection sampling ([SpecHub] Algorithm 1), K-SEQ (SpecTr) and SpecHub's rule
([SpecHub] Algorithm 3) all have this shape once the per-candidate acceptance probabilities
are known for each drafted tuple, so the exact output law and the sampler are shared here.
"""

from __future__ import annotations

import numpy as np

from otlp.rules.base import sample_rows
from otlp.solvers.arrays import FloatArray, IntArray


def sequential_conditionals(
    candidates: IntArray, accept: FloatArray, final: FloatArray
) -> FloatArray:
    """Exact output laws: candidate j wins with prod_{i<j}(1 - a_i) a_j, else ``final``.

    ``candidates``/``accept`` are (m, L); ``final`` is (K,) or (m, K).
    """
    m, length = candidates.shape
    final = np.broadcast_to(final, (m, final.shape[-1]))
    out = np.zeros(final.shape)
    stay = np.ones(m)
    rows = np.arange(m)
    for j in range(length):
        np.add.at(out, (rows, candidates[:, j]), stay * accept[:, j])
        stay = stay * (1.0 - accept[:, j])
    return out + stay[:, None] * final


def sequential_verify(
    candidates: IntArray, accept: FloatArray, final: FloatArray, rng: np.random.Generator
) -> IntArray:
    """Run the rule: one uniform per candidate, the first u_j < a_j wins, else draw ``final``."""
    m = candidates.shape[0]
    hit = rng.random(accept.shape) < accept
    first = np.argmax(hit, axis=1)
    out = candidates[np.arange(m), first]
    missed = ~hit.any(axis=1)
    if missed.any():
        rows = np.broadcast_to(final, (m, final.shape[-1]))[missed]
        out[missed] = sample_rows(rng, rows)
    return out
