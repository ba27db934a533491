"""Hierarchical Speculative Decoding (HSD) on one drafted chain, exactly (Zhou et al.,
"Overcoming Joint Intractability with Lossless Hierarchical Speculative Decoding", ICLR 2026,
arXiv 2601.05724; docs/hsd.md).

HSD reasons about joint (sequence-level) masses. Along a drafted chain X_1..X_L write
Q_k = q(X_<=k), P_k = p(X_<=k) for the draft's and the target's joint probabilities of the
length-k prefix and r_k = P_k / Q_k (r_0 = 1). The *branches* accessible at level k are the
sequences X_<=k v, v in the vocabulary: the draft puts joint mass Q_k q(v | X_<=k) on them, the
target P_k p(v | X_<=k). HSD

1. tests the whole draft on its joint ratio: accept X_1..X_L with probability ``accept``
   (then the bonus token follows the target);
2. otherwise walks back up the chain, k = L - 1, ..., 0. At level k the branches carry an
   *excess* (draft mass above the target's) and a *deficit* (target mass above the draft's):

       deficit_k = sum_v max(c_k Q_k p(v | X_<=k) - Q_k q(v | X_<=k), 0)
       excess_k  = sum_v max(Q_k q(v | X_<=k) - c_k Q_k p(v | X_<=k), 0)

   where c_k Q_k (c_k <= min(1, r_k)) is the target mass of the prefix X_<=k that the level
   may still claim (the "capping", below; uncapped it would be P_k = r_k Q_k). It stops there
   with probability deficit_k / max(deficit_k, excess_k) (the rejected excess pays the
   deficit) and emits X_<=k followed by a token drawn from the
   normalised deficit max(c_k p(. | X_<=k) - q(. | X_<=k), 0); else it steps back to k - 1.
   Q_k cancels in both, so everything is computed from the on-path conditionals (no joint
   mass underflows for long chains). c_0 = 1, so level 0 always stops (the deficit and the
   excess there are both the total variation).

The capping is what the paper's text available to this project does not pin down (the HTML
page's method section could not be retrieved; docs/hsd.md says what could). Three readings are
implemented, ``variant``:

* ``"capped"`` (default, registered as ``"hsd"``): c_k = r_k / max(1, r_1, ..., r_k), the
  prefix's joint ratio divided by its running maximum, at every level *including* the full
  draft's test (``accept = c_L``). This is the only reading of the three that is lossless on
  every chain; its stop law is block verification's ([GBV] Eqs. 4-7) term by term, because the
  running-max cap is the closed form of block verification's weight recursion
  w_k = min(w_{k-1} p(X_k)/q(X_k), 1) and deficit / max(deficit, excess) is its
  h_k = r / (r + 1 - w) when w <= 1.
* ``"joint"``: the same branch caps but the full draft is tested on the raw joint ratio,
  ``accept = min(1, r_L)`` (the public repository's ``simulation.py`` reading). Accepts more
  than block verification whenever an earlier prefix ratio exceeds max(1, r_L), and is then
  not lossless (no valid single-path verifier can exceed block verification, [GBV] Thm 3.4).
* ``"clipped"``: c_k = min(1, r_k) and ``accept = min(1, r_L)`` (the public repository's
  ``algorithm_clean.py`` / EAGLE-3H reading, which also never steps back past a level with
  r_k >= 1; with c_k = 1 there the stop probability is 1 anyway). Lossy as well.

Inputs and output follow :mod:`otlp.multistep.single_path`: ``target`` (P, L + 1, V),
``draft`` (P, L, V), ``tokens`` (P, L); ``stop[P, i]`` = P(tau = i | path), ``correction[P,
i]`` the law of the token emitted after the i accepted ones.
"""

from __future__ import annotations

import numpy as np

from otlp.multistep.single_path import StopLaw, on_path
from otlp.solvers.arrays import FloatArray, IntArray

VARIANTS = ("capped", "joint", "clipped")


def prefix_log_ratios(target: FloatArray, draft: FloatArray, tokens: IntArray) -> FloatArray:
    """log r_k = log(P_k / Q_k) for k = 0..L (``(P, L + 1)``, r_0 = 1), as sums of on-path
    conditional log ratios (a ratio over a subnormal draft probability overflows, its log does
    not); a path the draft cannot produce gets ratio 1 from that token on (it carries no draft
    mass, so its stop law is never weighted); -inf where the target's probability is 0."""
    num, den = on_path(target, tokens), on_path(draft, tokens)
    with np.errstate(divide="ignore", invalid="ignore"):
        step = np.where(den > 0, np.log(num) - np.log(np.where(den > 0, den, 1.0)), 0.0)
    zeros = np.zeros((tokens.shape[0], 1))
    return np.cumsum(np.hstack([zeros, step]), axis=1)


def caps(log_ratios: FloatArray, variant: str = "capped") -> tuple[FloatArray, FloatArray]:
    """(c_0..c_{L-1}, accept): the branch caps and the full draft's acceptance probability,
    from the prefix log ratios (:func:`prefix_log_ratios`)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant: expected one of {VARIANTS}, got {variant!r}")
    if variant == "clipped":
        branch = np.exp(np.minimum(log_ratios, 0.0))
    else:
        # r_k / max(1, r_1, ..., r_k): r_0 = 1 is the running maximum's floor.
        branch = np.exp(log_ratios - np.maximum.accumulate(log_ratios, axis=1))
    last = np.exp(np.minimum(log_ratios[:, -1], 0.0))
    accept = branch[:, -1] if variant == "capped" else last
    return branch[:, :-1], accept


def chain(
    target: FloatArray, draft: FloatArray, tokens: IntArray, *, variant: str = "capped"
) -> StopLaw:
    """HSD's law on single draft paths as a :class:`StopLaw` (vectorised over paths)."""
    paths = tokens.shape[0]
    branch, accept = caps(prefix_log_ratios(target, draft, tokens), variant)
    signed = branch[:, :, None] * target[:, :-1] - draft  # per unit of Q_k: target - draft
    owed = np.maximum(signed, 0.0)
    deficit = owed.sum(axis=2)
    excess = np.maximum(-signed, 0.0).sum(axis=2)
    paid = np.maximum(deficit, excess)
    with np.errstate(divide="ignore", invalid="ignore"):
        # paid = 0 only where c_k = 1 and the two laws agree: unreachable from below
        # (every deeper level then stops surely), so the value is immaterial; 1 keeps it so.
        settle = np.where(paid > 0, deficit / paid, 1.0)
    # Walk back from the full draft: level L first, then L-1, ..., 0.
    tests = np.hstack([settle, accept[:, None]])
    later = np.cumprod((1.0 - tests)[:, :0:-1], axis=1)[:, ::-1]
    stop = tests * np.hstack([later, np.ones((paths, 1))])
    with np.errstate(divide="ignore", invalid="ignore"):
        residual = np.where(deficit[:, :, None] > 0, owed / deficit[:, :, None], 0.0)
    correction = np.concatenate([residual, target[:, -1:]], axis=1)
    return StopLaw(stop, correction)


def sample(
    target: FloatArray,
    draft: FloatArray,
    tokens: IntArray,
    rng: np.random.Generator,
    *,
    variant: str = "capped",
) -> list[int]:
    """One HSD call on one drafted path (``target`` (L + 1, V), ``draft`` (L, V), ``tokens``
    (L,)), drawn the way a decoder runs it: one uniform for the full draft's joint test, then
    one per level while walking back, stopping at the first level that settles. Returns the
    accepted tokens followed by the emitted one."""
    steps = tokens.shape[0]
    branch, accept = caps(prefix_log_ratios(target[None], draft[None], tokens[None]), variant)
    if rng.random() < accept[0]:
        return [*tokens.tolist(), _draw(rng, target[steps])]
    for k in range(steps - 1, -1, -1):
        signed = branch[0, k] * target[k] - draft[k]
        owed = np.maximum(signed, 0.0)
        deficit = float(owed.sum())
        paid = max(deficit, float(np.maximum(-signed, 0.0).sum()))
        if deficit > 0 and rng.random() * paid < deficit:
            return [*tokens[:k].tolist(), _draw(rng, owed / deficit)]
    raise AssertionError("level 0 always settles (its deficit is the total variation)")


def _draw(rng: np.random.Generator, law: FloatArray) -> int:
    return int(rng.choice(law.shape[0], p=law / law.sum()))
