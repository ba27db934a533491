"""vLLM's ``synthetic`` rejection method: a benchmarking mode of its rejection sampler that
imposes an acceptance schedule instead of testing the drafts against the target. Lossy by
design (vLLM's own docs: outputs may be incorrect, benchmarking only).

vLLM's speculative config (``rejection_sample_method="synthetic"``) takes per-position
*unconditional* acceptance rates a_1 >= a_2 >= ... (a_i = P(the first i drafts are all
accepted); or a mean acceptance length, resolved to such a schedule) and the sampler converts
them to conditional rates c_i = a_i / a_(i-1) (a_0 = 1; 0 after a zero). Along the chain the
i-th draft is accepted when its uniform u_i < c_i, whatever p and q; at the first refusal the
sampler emits its recovered token (a draw from norm(max(p - q, 0)) at that position, as the
standard method); after a fully accepted chain the bonus token is a draw from the target.

The schedule is the deployment's; :data:`RATES` is an illustrative one (vLLM has no default).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from otlp.referee.subjects.common import (
    draw,
    first_child_chain,
    position_args,
    residual,
    tree_args,
)

RATES = (0.7, 0.5, 0.4)  # synthetic_acceptance_rates: unconditional, non-increasing


def conditional_rates(rates: tuple[float, ...] = RATES) -> list[float]:
    """vLLM's conversion of unconditional rates to conditional ones: c_i = a_i / a_(i-1),
    a_0 = 1, and 0 after a zero rate."""
    before = (1.0, *rates[:-1])
    return [a / b if b > 0.0 else 0.0 for a, b in zip(rates, before, strict=True)]


def vllm_synthetic(p: ArrayLike, q: ArrayLike, drafts: ArrayLike, rng: np.random.Generator) -> int:
    """One position of vLLM's synthetic rejection: the first draft is accepted with the first
    conditional rate (0.7), else a draw from norm(max(p - q, 0)) (p itself where q = p). Right
    only where 0.7 q + 0.3 norm(max(p - q, 0)) = p, e.g. p = q. p = (0.5, 0.5),
    q = (0.2, 0.8): law 0.7 (0.2, 0.8) + 0.3 (1, 0) = (0.44, 0.56), TV 0.06.

    Protocol: position; with n > 1 drafts it reads the first. Draft scheme: the first draft
    drawn from ``q``. Expected lossy.
    """
    target, laws, tokens = position_args(p, q, drafts)
    if tokens.shape[0] == 0:
        raise ValueError("drafts: one draft expected, got none")
    if rng.random() < conditional_rates()[0]:
        return int(tokens[0])
    return draw(residual(target, laws[0]), rng)


def vllm_synthetic_chain_tree(
    tokens: ArrayLike, parents: ArrayLike, p: ArrayLike, q: ArrayLike, rng: np.random.Generator
) -> tuple[list[int], int]:
    """vLLM's synthetic rejection on its chain: the i-th drafted token is accepted when
    u_i < c_i (:func:`conditional_rates` of :data:`RATES`: 0.7, 5/7, 0.8), whatever p and q; at
    the first refusal the emitted token is a draw from norm(max(p - q, 0)) at that context;
    after the last accepted token a bonus token from p.

    Protocol: tree, read as a chain (on a wider tree, the chain of first children; at most
    ``len(RATES)`` tokens, vLLM's num_speculative_tokens). Draft scheme: each token from q at
    its context. Expected lossy.
    """
    row, shape, target, draft = tree_args(tokens, parents, p, q)
    chain = first_child_chain(row, shape)
    rates = conditional_rates()
    if len(chain) > len(rates):
        raise ValueError(f"tokens: a chain of {len(chain)} drafts, the schedule has {len(rates)}")
    path: list[int] = []
    for node, rate in zip(chain, rates, strict=False):
        context = path[-1] + 1 if path else 0
        if not rng.random() < rate:
            return path, draw(residual(target[context], draft[context]), rng)
        path.append(node)
    return path, draw(target[path[-1] + 1 if path else 0], rng)
