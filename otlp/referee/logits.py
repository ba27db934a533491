"""The target of an engine layout handed as logits with the sampling parameters the engine
applies (``temperature``, ``top_k``, ``top_p``, one each per row): :func:`keeping` keeps the
whole support, :func:`truncating` hands logits whose truncation really removes mass.

**The convention** (vLLM and Hugging Face transformers alike): divide the logits by the
temperature and take the softmax; top-k keeps every token whose logit is at least the k-th
largest (ties with the k-th all kept); renormalise; top-p keeps a token when the mass ranked
strictly above it (by decreasing probability) is below ``top_p`` — the smallest head whose mass
reaches ``top_p``, *the token that crosses top_p kept* — and renormalise. Sources, read for this
module: vLLM's ``apply_sampling_constraints`` (``vllm/v1/sample/rejection_sampler.py``:
``logits.div_(temperature)``, then ``apply_top_k_top_p``) and ``apply_top_k_top_p_pytorch``
(``vllm/v1/sample/ops/topk_topp_sampler.py``: top-k masks ``logits_sort <`` the k-th largest;
top-p masks the ascending cumulative softmax ``<= 1 - p``, the largest always kept); transformers'
``_get_logits_processor`` (``src/transformers/generation/utils.py``: ``TemperatureLogitsWarper``,
``TopKLogitsWarper``, ``TopPLogitsWarper`` in that order), ``TopKLogitsWarper`` (``scores <``
the k-th of ``torch.topk`` removed) and ``TopPLogitsWarper`` (``cumulative_probs <= 1 - top_p``
removed, ascending). :func:`otlp.verification.engine_layouts.target_laws` implements the same
convention; it breaks a tie at the top-p boundary by token id where the engines' sort leaves
it unspecified, and the logits built here never put a tie, or a gap the size of a rounding
error, across a top-k or a top-p boundary, so every implementation of the convention gives
the same law.

**Truncating** (:func:`truncating`). The law to sample at every context is the case's target
``p`` (the referee judges against it, unchanged); the logits are ``T · log w`` where ``w`` is
``p`` plus filler mass on tokens outside p's support that the convention removes. A row's
temperature is 0.7, 1 or 1.6 by the sum of its drafted tokens, and picks what truncates:

* 0.7 — top-p only (``top_k = V``, no restriction): at a context with fillers, the support
  gets mass σ < 1 and the fillers the rest, each at most half the support's smallest mass, and
  ``top_p = σ (1 - p_min / 4)`` lies strictly inside the gap where the last support token
  crosses it and the first filler does not (σ is set per context from the row's ``top_p``);
* 1 — top-k only (``top_p = 1``): ``top_k`` is the least keeping every context's support (one
  more than the tokens above its smallest mass, so it may cut inside a tie at the smallest
  mass: all tied tokens stay), and fillers below the support are cut by it;
* 1.6 — both: one token above that top-k keeps a filler that top-p must then remove, after
  the top-k renormalisation (fillers below it are cut by top-k).

``top_p`` is the least value under which every context with fillers is truncated as planned;
a context that cannot be (no filler kept by top-k, a support mass below :data:`TOP_P_FLOOR`)
raises it to keep that context whole, with a margin of a quarter of its smallest mass (or to
1). A rule that applies the temperature after top-p, drops the crossing token, keeps exactly
k tokens, or applies top-p before top-k changes the law on some drafted rows (the tests show
which).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from otlp.solvers.arrays import FloatArray, IntArray

TEMPERATURES = (0.7, 1.0, 1.6)  # a row's temperature, by the sum of its drafted tokens
TOP_P_FLOOR = 1e-3  # top_p < 1 only where every target mass on the support is at least this
GAP = 0.25  # top_p sits this share of the smallest support mass below the support's mass
SURVIVOR = 0.5  # a filler top-p must remove has at most this share of the smallest support mass
CUT = 0.75  # a filler top-k removes has this share of the next larger mass


def temperatures(tokens: IntArray) -> FloatArray:
    """One temperature per row of drafted ``tokens`` (B, k): :data:`TEMPERATURES` by the sum
    of the row's tokens."""
    return np.array([TEMPERATURES[int(t.sum()) % len(TEMPERATURES)] for t in tokens])


def keeping(tokens: IntArray, p: FloatArray) -> tuple[FloatArray, dict[str, Any]]:
    """Logits ``T · log p`` of the rows' laws ``p`` (B, C, V) (-inf off the support) and the
    per-row ``temperature``, ``top_k`` (the largest support among the row's contexts) and
    ``top_p`` (just above 1 minus the smallest target mass; 1 where that mass is below
    :data:`TOP_P_FLOOR`), under which the law to sample is p itself."""
    vocab = p.shape[2]
    temperature = temperatures(tokens)
    with np.errstate(divide="ignore"):
        logits = temperature[:, None, None] * np.log(p)
    positive = p > 0
    top_k = positive.sum(axis=2).max(axis=1).astype(np.int64)
    smallest = np.where(positive, p, np.inf).min(axis=(1, 2))
    top_p = np.where(smallest >= TOP_P_FLOOR, 1.0 - smallest / 2, 1.0)
    return logits, {"temperature": temperature, "top_k": np.minimum(top_k, vocab), "top_p": top_p}


def truncating(tokens: IntArray, p: FloatArray) -> tuple[FloatArray, dict[str, Any]]:
    """Logits (B, C, V) and per-row ``temperature``, ``top_k``, ``top_p`` whose truncation by
    the convention (module notes) is p (B, C, V) at every context, with mass on tokens outside
    p's support wherever the row's parameters can remove it."""
    rows, _, vocab = p.shape
    temperature = temperatures(tokens)
    logits = np.empty_like(p)
    top_k = np.empty(rows, dtype=np.int64)
    top_p = np.empty(rows)
    for b in range(rows):
        contexts = [_Context(law) for law in p[b]]
        regime = TEMPERATURES.index(float(temperature[b]))  # 0: top-p, 1: top-k, 2: both
        top_k[b] = vocab if regime == 0 else _top_k(contexts, vocab, extra=regime == 2)
        top_p[b] = 1.0 if regime == 1 else _top_p(contexts, int(top_k[b]), vocab)
        with np.errstate(divide="ignore"):
            weights = [c.weights(int(top_k[b]), float(top_p[b]), vocab) for c in contexts]
            logits[b] = temperature[b] * np.log(np.stack(weights))
    return logits, {"temperature": temperature, "top_k": top_k, "top_p": top_p}


class _Context:
    """One context's law to sample and the filler it can take."""

    def __init__(self, law: FloatArray) -> None:
        self.law = law
        support = law > 0
        self.size = int(support.sum())
        self.smallest = float(law[support].min())
        self.above = int(np.count_nonzero(law > self.smallest))  # tokens ranked above a tie
        self.zeros = np.flatnonzero(~support)

    def survivors(self, top_k: int, vocab: int) -> int:
        """Fillers that top-k keeps (all of them when ``top_k`` is the vocabulary)."""
        if top_k >= vocab:
            return int(self.zeros.shape[0])
        return max(0, min(int(self.zeros.shape[0]), top_k - self.size))

    def lowest_top_p(self, survivors: int) -> float:
        """The least ``top_p`` at which top-p can remove ``survivors`` fillers here (each at
        most :data:`SURVIVOR` of the smallest support mass); 2 when it cannot."""
        if survivors == 0 or self.smallest < TOP_P_FLOOR:
            return 2.0
        return (1 - GAP * self.smallest) / (1 + survivors * SURVIVOR * self.smallest)

    def whole_top_p(self) -> float:
        """The least ``top_p`` keeping this context's support whole, with a margin of
        :data:`GAP` of its smallest mass (1 below :data:`TOP_P_FLOOR`)."""
        if self.smallest < TOP_P_FLOOR:
            return 1.0
        return 1 - (1 - GAP) * self.smallest

    def filled(self, top_p: float, survivors: int) -> bool:
        """Whether top-p removes fillers here: ``top_p`` in its range, below the support."""
        return self.lowest_top_p(survivors) <= top_p < 1 - GAP * self.smallest

    def weights(self, top_k: int, top_p: float, vocab: int) -> FloatArray:
        """The context's unnormalised weights before truncation (the logits' softmax)."""
        survivors = self.survivors(top_k, vocab)
        out = np.zeros_like(self.law)
        if self.filled(top_p, survivors):
            share = top_p / (1 - GAP * self.smallest)  # the support's mass after top-k
            each = (1 - share) / survivors
            out[:] = share * self.law
            out[self.zeros[:survivors]] = each
            out[self.zeros[survivors:]] = CUT * each  # only when top_k < vocab
            return out
        out[:] = self.law
        filler = CUT * self.smallest
        if survivors == 0 and top_k < vocab and np.log(filler) < np.log(self.smallest) - 0.1:
            out[self.zeros] = filler  # cut by top-k (not where rounding would tie them)
        return out


def _top_k(contexts: list[_Context], vocab: int, *, extra: bool) -> int:
    """The least top-k keeping every context's support (ties at the k-th all kept), one more
    with ``extra`` while that still cuts something; the vocabulary when nothing can be cut."""
    least = max(c.above + 1 for c in contexts)
    if extra and least + 1 < vocab:
        return least + 1
    return min(least, vocab)


def _top_p(contexts: list[_Context], top_k: int, vocab: int) -> float:
    """The least ``top_p`` that removes the fillers top-k keeps wherever it can, raised to keep
    whole every context where it cannot (module notes)."""
    lowest = [c.lowest_top_p(c.survivors(top_k, vocab)) for c in contexts]
    feasible = [v for v in lowest if v <= 1]
    top_p = max(feasible) if feasible else 1.0
    for context in contexts:
        survivors = context.survivors(top_k, vocab)
        if not context.filled(top_p, survivors) and top_p < context.whole_top_p():
            top_p = context.whole_top_p()
    return top_p
