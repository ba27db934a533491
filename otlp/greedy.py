"""The greedy draft scheme ([GR] §5 and Appendix O, after Hu et al.): the top n-1 draft tokens
are drafted deterministically and the n-th is drawn from q without replacement from the rest.

Only k - n + 1 draft tuples have positive probability, so the OTLP is small, and alpha* has a
closed form. Local token ids follow the instance's draft vocabulary, which lists tokens by
decreasing draft probability: the fixed tokens are local ids 0..n-2.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from otlp.solvers.arrays import FloatArray, IntArray


def last_draw(q: FloatArray, n: int) -> FloatArray:
    """Law of the n-th draft over the local vocabulary: q on ids >= n-1, renormalised by a sum
    of the remaining probabilities (never 1 - q(top), which cancels when q(top) ~ 1)."""
    rest = np.where(np.arange(q.shape[0]) >= n - 1, q, 0.0)
    total = rest.sum()
    if not total > 0:
        raise ValueError(f"n: the greedy scheme needs {n} draft tokens of positive probability")
    return rest / total


def tuples(q: FloatArray, n: int) -> tuple[IntArray, FloatArray]:
    """Every draft tuple of positive probability (draw order) and its mass."""
    law = last_draw(q, n)
    last = np.flatnonzero(law > 0)
    members = np.hstack([np.tile(np.arange(n - 1), (last.shape[0], 1)), last[:, None]])
    return members.astype(np.int64), law[last]


def set_mass(q: FloatArray, n: int, subsets: IntArray) -> FloatArray:
    """P(set(omega) = s) for sorted n-subsets s (rows): nonzero only for {0..n-2, x}."""
    law = last_draw(q, n)
    fixed = np.all(subsets[:, : n - 1] == np.arange(n - 1), axis=1)
    return np.where(fixed, law[subsets[:, n - 1]], 0.0)


def tuple_mass(q: FloatArray, n: int, ordered: IntArray) -> FloatArray:
    """Mass of ordered tuples (rows): the fixed tokens in order, then the last draw."""
    law = last_draw(q, n)
    fixed = np.all(ordered[:, : n - 1] == np.arange(n - 1), axis=1)
    last = ordered[:, n - 1]
    return np.where(fixed & (last >= n - 1), law[last], 0.0)


def sample_local(q: FloatArray, n: int, rng: np.random.Generator, size: int) -> IntArray:
    """``size`` greedy draft tuples (local ids, draw order)."""
    law = last_draw(q, n)
    last = rng.choice(q.shape[0], size=size, p=law)
    return np.column_stack([np.tile(np.arange(n - 1), (size, 1)), last]).astype(np.int64)


def mass_inside(q: FloatArray, n: int, mask: NDArray[np.bool_]) -> float:
    """P(all n drafts lie in the masked tokens)."""
    if not mask[: n - 1].all():
        return 0.0
    return float(last_draw(q, n)[mask].sum())


def optimal_subset(p: FloatArray, q: FloatArray, n: int) -> NDArray[np.bool_]:
    """H* in closed form: psi(H) = p(H) for H not containing the fixed tokens (min: the empty
    set), else p(T) + sum over H \\ T of (p(x) - r(x)); the best such H takes every x with
    r(x) > p(x). Returns the better of the two."""
    law = last_draw(q, n)
    mask = law > p
    mask[: n - 1] = True
    value = p[mask].sum() - law[mask].sum()
    return mask if value < 0 else np.zeros(p.shape[0], dtype=bool)
