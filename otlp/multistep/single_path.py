"""Single-path verification of an L-token draft block from on-path values, batched over paths.

Each rule returns a :class:`StopLaw`: for each drafted path, the probability that exactly
``tau = i`` draft tokens are accepted (i = 0..L) and the law of the correction token Y drawn
after them. The same kernels serve exact enumeration (all V**L paths at once) and Monte Carlo
decoding (one sampled path).

* :func:`tokenwise` — standard speculative sampling ([GBV] §2.1, Eq. 3): accept X_i with
  probability min(1, M_b(X_i | X_<i) / M_s(X_i | X_<i)), stop at the first rejection, draw Y
  from the normalised residual max(M_b - M_s, 0).
* :func:`block` — block verification ([GBV] §2.1, Eqs. 4–7; docs/design.md, "Formulas not
  legible"): weights p_0 = 1, p_i = min(p_{i-1} M_b(X_i | X_<i) / M_s(X_i | X_<i), 1); prefix
  i < L is accepted independently with probability h_i = r_i / (r_i + 1 - p_i), where
  r_i = sum_x max(p_i M_b(x | X_<=i) - M_s(x | X_<=i), 0), and h_L = p_L; tau is the longest
  accepted prefix and Y is proportional to max(p_tau M_b(. | X_<=tau) - M_s(. | X_<=tau), 0)
  (Y ~ M_b(. | X_<=L) when tau = L).

The block-verification formulas are a reconstruction ([GBV]'s equations did not survive its
text export); exact
target-matching of the first L + 1 tokens on enumerated models (tests/test_multistep.py)
and equality with the single-path LP optimum (Theorem 3.4) confirm them.

Inputs: ``target`` (P, L + 1, V) — M_b after each prefix X_<i, i = 1..L + 1; ``draft``
(P, L, V) — the draft law M_s after each X_<i, i = 1..L; ``tokens`` (P, L) — the drafted path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from otlp.solvers.arrays import FloatArray, IntArray


@dataclass(frozen=True)
class StopLaw:
    """``stop[P, i]`` = P(tau = i | path); ``correction[P, i]`` = law of Y given tau = i."""

    stop: FloatArray
    correction: FloatArray


def on_path(values: FloatArray, tokens: IntArray) -> FloatArray:
    """``values[P, i, tokens[P, i]]`` for i < L: the on-path probabilities."""
    steps = tokens.shape[1]
    rows = np.arange(tokens.shape[0])[:, None]
    return values[rows, np.arange(steps)[None, :], tokens]


def tokenwise(target: FloatArray, draft: FloatArray, tokens: IntArray) -> StopLaw:
    """Standard token-wise speculative sampling ([GBV] Eq. 3)."""
    accept = _capped_ratio(on_path(target, tokens), on_path(draft, tokens))
    survive = np.cumprod(np.hstack([np.ones((tokens.shape[0], 1)), accept]), axis=1, dtype=float)
    stop = survive * np.hstack([1.0 - accept, np.ones((tokens.shape[0], 1))])
    residual = _normalised(np.maximum(target[:, :-1] - draft, 0.0))
    return StopLaw(stop, np.concatenate([residual, target[:, -1:]], axis=1))


def block(target: FloatArray, draft: FloatArray, tokens: IntArray) -> StopLaw:
    """Block verification ([GBV] Eqs. 4–7)."""
    ratio = _capped_ratio(on_path(target, tokens), on_path(draft, tokens), cap=np.inf)
    paths, steps = tokens.shape
    weights = np.ones((paths, steps + 1))
    for i in range(steps):  # a zero weight stays zero (a ratio over a subnormal q overflows)
        kept = weights[:, i] > 0
        step = np.minimum(np.where(kept, weights[:, i], 1.0) * ratio[:, i], 1.0)
        weights[:, i + 1] = np.where(kept, step, 0.0)
    excess = np.maximum(weights[:, :-1, None] * target[:, :-1] - draft, 0.0)
    r = excess.sum(axis=2)
    denom = r + 1.0 - weights[:, :-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        h = np.where(denom > 0, r / denom, 1.0)
    h = np.hstack([np.minimum(h, 1.0), weights[:, -1:]])
    # tau = max{i : eta_i <= h_i}: P(tau = i) = h_i * prod_{j > i} (1 - h_j).
    later = np.cumprod((1.0 - h)[:, :0:-1], axis=1)[:, ::-1]
    stop = h * np.hstack([later, np.ones((paths, 1))])
    correction = np.concatenate([_normalised(excess), target[:, -1:]], axis=1)
    return StopLaw(stop, correction)


def _capped_ratio(num: FloatArray, den: FloatArray, cap: float = 1.0) -> FloatArray:
    """min(num / den, cap), with 1 where den = 0 (such paths carry no draft mass)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.where(den > 0, np.minimum(num / den, cap), 1.0)


def _normalised(rows: FloatArray) -> FloatArray:
    """Normalise along the last axis; all-zero rows stay zero (their stop probability is 0)."""
    total = rows.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, rows / total, 0.0)
