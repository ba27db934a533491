"""Numpy stand-ins for engines' verification functions, with the engines' own arguments, written
in this project from their published algorithms: what an adapter of an engine layout
(:mod:`otlp.referee.layouts`) calls where the engine is not installed (docs/referee.md's
examples and the tests run them; an engine's user calls the engine's function instead).

* :func:`vllm_rejection_sampler` — vLLM's ``RejectionSampler.forward`` (Leviathan et al. 2023,
  Algorithm 1, batched): ``min(1, p/q)`` per draft, the residual ``max(p - q, 0)`` at the first
  rejection, the caller's ``bonus_token_ids`` when every draft is accepted.
* :func:`eagle_evaluate_posterior` — EAGLE's ``evaluate_posterior`` with sampling (Li et al.
  2024): target-only recursive rejection over the candidate paths, the draft taken as certain;
  returns the law the caller draws the bonus from (``sample_p``).
* :func:`sglang_target_only` — SGLang's ``tree_speculative_sampling_target_only`` kernel: one
  coin per level from ``uniform_samples``, the first child whose running target mass reaches it
  accepted (or whose mass reaches ``threshold_single``; the running mass is divided by
  ``threshold_acc``), else the final token from the target without the tried children, by
  ``uniform_samples_for_final_sampling``; fills ``predicts``, ``accept_index`` and
  ``accept_token_num`` in place. :func:`sglang_tree_sampler` is the ``sglang_tree`` layout's
  sampler around it: the outputs allocated and the coins drawn from ``rng``.
* :func:`transformers_speculative_sampling` — transformers' ``_speculative_sampling``: ``r <=
  p/q`` per draft, the residual at the first rejection, the next target law after all.

Each draws only from the ``rng`` (or the uniforms) it is given, so the referee's exact mode
follows it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from otlp.solvers.arrays import FloatArray, IntArray
from otlp.verification.engine_layouts import target_laws


def _residual(p: FloatArray, q: FloatArray) -> FloatArray:
    """max(p - q, 0) normalised; p where it vanishes (p = q: a rejection has probability 0)."""
    left = np.maximum(p - q, 0.0)
    total = left.sum()
    return left / total if total > 0 else p


def _softmax(logits: FloatArray) -> FloatArray:
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def vllm_rejection_sampler(
    target_with_bonus_probs: FloatArray,
    bonus_token_ids: IntArray,
    draft_probs: FloatArray,
    draft_token_ids: IntArray,
    rng: Any,
) -> IntArray:
    """Output ids (B, k + 1): the accepted drafts, then the recovered or the bonus token,
    padded with -1 (arguments as vLLM's ``RejectionSampler.forward``, ``rng`` for its
    generators)."""
    rows, k = draft_token_ids.shape
    out = np.full((rows, k + 1), -1, dtype=np.int64)
    for b in range(rows):
        p, q = target_with_bonus_probs[b], draft_probs[b]
        for i, x in enumerate(draft_token_ids[b]):
            if rng.random() * q[i, x] < p[i, x]:
                out[b, i] = x
                continue
            out[b, i] = rng.choice(p.shape[1], p=_residual(p[i], q[i]))
            break
        else:
            out[b, k] = bonus_token_ids[b, 0]
    return out


def eagle_evaluate_posterior(
    logits: FloatArray,
    candidates: IntArray,
    temperature: float,
    top_k: int,
    top_p: float,
    rng: Any,
) -> tuple[int, int, FloatArray]:
    """``(best_candidate, accept_length, sample_p)`` for candidate paths (P, L + 1) and their
    logits per prefix (P, L + 1, V): at each level the distinct next tokens of the paths that
    carry the accepted prefix are tried in path order, x accepted with probability p(x), a
    rejected x removed from p; ``sample_p`` is the last residual, or the target at the accepted
    prefix when nothing was rejected there."""
    laws = target_laws(logits, temperature, top_k, top_p)
    best, length = 0, 0
    while length + 1 < candidates.shape[1]:
        prefix = candidates[best, 1 : length + 1]
        live = [
            j
            for j in range(candidates.shape[0])
            if candidates[j, length + 1] >= 0
            and np.array_equal(candidates[j, 1 : length + 1], prefix)
        ]
        law, tried = laws[best, length].copy(), set()
        for j in live:
            x = int(candidates[j, length + 1])
            if x in tried:
                continue
            tried.add(x)
            if rng.random() <= law[x]:
                best, length = j, length + 1
                break
            law[x] = 0.0
            law /= law.sum()
        else:
            return best, length, law
    return best, length, laws[best, length]


def sglang_target_only(
    predicts: IntArray,
    accept_index: IntArray,
    accept_token_num: IntArray,
    candidates: IntArray,
    retrive_index: IntArray,
    retrive_next_token: IntArray,
    retrive_next_sibling: IntArray,
    uniform_samples: Any,
    uniform_samples_for_final_sampling: Any,
    target_probs: FloatArray,
    draft_probs: FloatArray,
    threshold_single: float = 1.0,
    threshold_acc: float = 1.0,
) -> None:
    """SGLang's target-only tree verification (module notes), filling ``predicts`` (B·N,),
    ``accept_index`` (B, S) and ``accept_token_num`` (B,) in place."""
    rows, vocab = candidates.shape[0], target_probs.shape[2]
    for b in range(rows):
        node, accepted = 0, 0
        accept_index[b, 0] = retrive_index[b, 0]
        while True:
            law, mass = target_probs[b, node].copy(), 0.0
            child = retrive_next_token[b, node]
            while child != -1:
                x = candidates[b, child]
                mass += target_probs[b, node, x]
                coin = uniform_samples[b, node]  # one coin per level, the parent's
                if coin <= mass / threshold_acc or target_probs[b, node, x] >= threshold_single:
                    break
                law[x] = 0.0
                child = retrive_next_sibling[b, child]
            if child == -1:
                law = law if law.sum() > 0 else target_probs[b, node]
                cdf = np.cumsum(law) / law.sum()
                final = uniform_samples_for_final_sampling[b]
                token = next((t for t in range(vocab - 1) if final < cdf[t]), vocab - 1)
                predicts[retrive_index[b, node]] = token
                break
            predicts[retrive_index[b, node]] = candidates[b, child]
            accepted += 1
            accept_index[b, accepted] = retrive_index[b, child]
            node = child
        accept_token_num[b] = accepted


def sglang_tree_sampler(
    candidates: IntArray,
    retrive_index: IntArray,
    retrive_next_token: IntArray,
    retrive_next_sibling: IntArray,
    target_probs: FloatArray,
    draft_probs: FloatArray,
    rng: Any,
    threshold_acc: float = 1.0,
) -> tuple[IntArray, IntArray, IntArray]:
    """``(predicts, accept_index, accept_token_num)`` of :func:`sglang_target_only` on the
    ``sglang_tree`` layout's arguments (:mod:`otlp.referee.layouts`): its outputs allocated
    (-1 where nothing is written) and its coins, one per node and one for the final draw of each
    row, drawn from ``rng``."""
    rows, count = candidates.shape
    predicts, accept_index = np.full(rows * count, -1), np.full((rows, count), -1)
    accept_token_num = np.zeros(rows, dtype=np.int64)
    sglang_target_only(
        predicts,
        accept_index,
        accept_token_num,
        candidates,
        retrive_index,
        retrive_next_token,
        retrive_next_sibling,
        rng.random((rows, count)),
        rng.random(rows),
        target_probs,
        draft_probs,
        threshold_acc=threshold_acc,
    )
    return predicts, accept_index, accept_token_num


def transformers_speculative_sampling(
    candidate_input_ids: IntArray,
    candidate_logits: FloatArray,
    candidate_length: int,
    new_logits: FloatArray,
    is_done_candidate: bool,
    rng: Any,
) -> tuple[IntArray, int]:
    """``(valid_tokens (1, n + 1), n_matches)`` (arguments as transformers'
    ``_speculative_sampling``, batch 1, ``rng`` for torch's global generator)."""
    ids = candidate_input_ids[0, -candidate_length:]
    q, p = _softmax(candidate_logits[0]), _softmax(new_logits[0])
    n = 0
    while n < candidate_length and rng.random() * q[n, ids[n]] <= p[n, ids[n]]:
        n += 1
    if is_done_candidate and n == candidate_length:
        return ids[None, :n].copy(), n - 1
    law = p[n] if n == candidate_length else _residual(p[n], q[n])
    return np.array([[*ids[:n], rng.choice(law.shape[0], p=law)]]), n
