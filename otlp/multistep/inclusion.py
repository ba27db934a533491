"""What the children of one drafted node hit: inclusion and hit probabilities of a node's draw.

A node drafts ``width`` children from the draft law ``q`` after its prefix, i.i.d. or without
replacement (the schemes of :func:`otlp.multistep.optimal_block_efficiency`). Two quantities
of that draw bound the optimum block efficiency (:mod:`.bound`, docs/optimum.md):

* :func:`inclusion` — P(token y is among the children), every y at once: 1 - (1 - q_y)^k
  i.i.d.; for sampling without replacement q_y (k = 1), q_y (1 + Σ_{z≠y} q_z / (1 - q_z))
  (k = 2), by enumeration of the ordered draws for k ≥ 3 (tiny vocabularies);
* :func:`hit` — 1 - E[Π_children (1 - f(c))] for f in [0, 1]^V: the probability that some
  child "fires" when child c fires independently with probability f(c) (its subtree reaches a
  set H). I.i.d.: 1 - (1 - q·f)^k; without replacement E[f(c1) + f(c2) - f(c1) f(c2)] with
  E[f(c1) f(c2)] = Σ_y q_y f_y Σ_{z≠y} q_z f_z / (1 - q_y) for k = 2;
* :func:`hit_one` — the same when f is nonzero at one token a only: (1 - (1 - q_a f))^k
  i.i.d., π_a f without replacement (a is drafted at most once), vectorised over f.

Sums "over the other tokens" are computed as a total minus one term, except at the largest
term, which is summed directly (only it can dominate the total and cancel).
"""

from __future__ import annotations

import numpy as np

from otlp.columns import sequence_probability
from otlp.limits import check_work
from otlp.solvers.arrays import FloatArray, IntArray


def inclusion(q: FloatArray, width: int, scheme: str) -> FloatArray:
    """P(y is among the ``width`` children drawn from ``q``), for every token y."""
    if scheme == "iid":
        with np.errstate(divide="ignore"):
            return np.asarray(-np.expm1(width * np.log1p(-q)))
    if width == 1:
        return q.copy()
    if width == 2:
        odds = _ratio(q, _others(q))  # q_z / (mass left after drawing z)
        return np.minimum(q * (1.0 + _others(odds)), 1.0)
    tuples, mass = _draws(q, width)
    counts = np.bincount(tuples.ravel(), weights=np.repeat(mass, width), minlength=q.shape[0])
    return np.asarray(counts, dtype=np.float64)


def hit(q: FloatArray, fire: FloatArray, width: int, scheme: str) -> float:
    """1 - E[Π over the children c of (1 - fire[c])] (children drawn from ``q``)."""
    if scheme == "iid" or width == 1:
        mean = float(q @ fire)
        if width == 1:
            return mean
        with np.errstate(divide="ignore"):
            return float(-np.expm1(width * np.log1p(-mean)))
    if width == 2:
        weighted = q * fire
        both = float(weighted @ _ratio(_others(weighted), _others(q)))
        return float(inclusion(q, 2, scheme) @ fire) - both
    tuples, mass = _draws(q, width)
    return float(mass @ (1.0 - np.prod(1.0 - fire[tuples], axis=1)))


def hit_one(
    q_token: float, included: float, width: int, fire: FloatArray, scheme: str
) -> FloatArray:
    """:func:`hit` when ``fire`` is zero but at one token a (``q_token`` = q_a, ``included``
    = P(a is a child)), for each value in the array ``fire`` of a's firing probability."""
    if scheme == "iid":
        with np.errstate(divide="ignore"):
            return np.asarray(-np.expm1(width * np.log1p(-q_token * fire)))
    return included * fire


def _others(values: FloatArray) -> FloatArray:
    """Σ_{z≠y} values[z] for every y (the largest term's complement summed directly)."""
    out = values.sum() - values
    if values.shape[0]:
        top = int(np.argmax(values))
        out[top] = np.delete(values, top).sum()
    return np.maximum(out, 0.0)


def _ratio(num: FloatArray, den: FloatArray) -> FloatArray:
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)


def _draws(q: FloatArray, width: int) -> tuple[IntArray, FloatArray]:
    """Every ordered draw of ``width`` distinct tokens of ``q``'s support and its probability."""
    support = np.flatnonzero(q > 0)
    check_work(
        "ordered draws without replacement enumerated for a node (k >= 3)",
        support.shape[0] ** width,
        advice="use k <= 2 children per node without replacement, or a tiny vocabulary",
    )
    grid = support[np.indices((support.shape[0],) * width).reshape(width, -1).T]
    distinct = np.all(np.sort(grid, axis=1)[:, 1:] != np.sort(grid, axis=1)[:, :-1], axis=1)
    tuples = np.ascontiguousarray(grid[distinct])
    return tuples, sequence_probability(q, tuples)
