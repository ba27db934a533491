"""Running a sampler on a case: its exact law (exact mode) or N draws of it (statistical mode).

Protocols (:data:`PROTOCOLS`):

* ``position`` — ``sampler(p, q, drafts, rng) -> token``: ``p`` (V,), ``q`` (V,) or (n, V)
  for independent drafters, ``drafts`` int64 (n,) drawn by the referee, ``rng`` a
  ``numpy.random.Generator``. The outcome is the token.
  A sampler with a true ``batched`` attribute takes a batch instead: ``p`` (B, V), ``q``
  (B, V) or (B, n, V), ``drafts`` (B, n), and returns (B,) tokens (exact mode: B = 1).
* ``tree`` — ``sampler(tokens, parents, p, q, rng) -> (nodes, bonus)``: one row of
  :func:`otlp.decoding.verify_tree`'s layout (tokens (N,), parents (N,), p and q (N + 1, V)
  at the contexts, index 0 the root and i + 1 node i); the accepted nodes must form a
  root-to-node path of the tree. The outcome is the emitted sequence (the accepted tokens,
  then the bonus) completed by the target to length D + 1, taken in law.
  A tree sampler with a true ``batched`` attribute takes B drafted trees of one shape per
  call: ``tokens`` (B, N), ``parents`` (N,), ``p`` and ``q`` (B, N + 1, V), and returns
  ``(nodes, bonus)``: ``nodes`` (B, L) the accepted path of each row, padded at its end with
  -1 (L >= 0; verify_tree's ``path_nodes``), ``bonus`` (B,) (exact mode: B = 1; the
  statistical mode calls it once per :data:`BATCH` draws).

Every call gets fresh copies of the arrays, so a sampler that writes into its inputs cannot
change the referee's instance. An output that breaks the protocol (a token out of range, a
path that is not a tree path) is an :class:`InvalidOutput`, reported as an ``error``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from otlp.referee.cases import Case, PositionCase, TreeCase
from otlp.referee.symbolic import NotEnumerable, ReplayBudget, exact_law, tree_key
from otlp.solvers.arrays import FloatArray

PROTOCOLS = ("position", "tree")
MAX_EXACT_DRAFTS = 4096  # drafted tuples or trees the exact mode enumerates per case
MAX_CASE_RUNS = 200_000  # replays of the sampler the exact mode spends on one case
MAX_CASE_SECONDS = 60.0  # and seconds of wall clock
BATCH = 1024  # rows (positions or trees) per call of a batched sampler
Sampler = Callable[..., Any]


class InvalidOutput(Exception):
    """The sampler's output breaks its protocol."""


@dataclass(frozen=True)
class Observation:
    """A sampler's law on a case over the case's outcomes (exact, or an empirical mean of
    ``samples`` draws), and its acceptance: P(output in drafts) for a position, block
    efficiency (E[accepted + 1]) for a tree."""

    law: FloatArray
    acceptance: float
    samples: int  # 0 = exact


def _token(value: object, vocab: int) -> int:
    try:
        token = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise InvalidOutput(f"returned {value!r}, not an integer token") from None
    if not 0 <= token < vocab:
        raise InvalidOutput(f"returned token {token}, outside 0..{vocab - 1}")
    return token


def emitted(case: TreeCase, tokens: np.ndarray, output: Any) -> tuple[int, ...]:
    """The emitted sequence of a tree sampler's ``(nodes, bonus)``, checked against the tree."""
    try:
        nodes, bonus = output
        path = [operator.index(v) for v in nodes]
    except (TypeError, ValueError):
        raise InvalidOutput(f"returned {output!r}, not (nodes, bonus)") from None
    previous = -1
    for node in path:
        if not 0 <= node < case.parents.shape[0] or int(case.parents[node]) != previous:
            raise InvalidOutput(f"accepted nodes {path} are not a root-to-node path")
        previous = node
    return (*(int(tokens[i]) for i in path), _token(bonus, case.vocab))


def _position_call(sampler: Sampler, case: PositionCase, drafts: np.ndarray, rng: Any) -> object:
    if getattr(sampler, "batched", False):  # one row of a batch
        return sampler(case.p[None].copy(), case.q[None].copy(), drafts[None].copy(), rng)[0]
    return sampler(case.p.copy(), case.q.copy(), drafts.copy(), rng)


def _position_draws(
    sampler: Sampler, case: PositionCase, drafts: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """The sampler's tokens for each row of ``drafts``, checked (batches of
    :data:`BATCH` rows for a ``batched`` sampler)."""
    rows = drafts.shape[0]
    tokens = np.empty(rows, dtype=np.int64)
    if not getattr(sampler, "batched", False):
        p, q = case.p, case.q
        for i in range(rows):
            tokens[i] = _token(sampler(p.copy(), q.copy(), drafts[i].copy(), rng), case.vocab)
        return tokens
    for start in range(0, rows, BATCH):
        part = drafts[start : start + BATCH]
        size = part.shape[0]
        p = np.repeat(case.p[None], size, axis=0)
        q = np.repeat(case.q[None], size, axis=0)
        out = np.asarray(sampler(p, q, part.copy(), rng))
        if out.shape != (size,) or not np.issubdtype(out.dtype, np.integer):
            raise InvalidOutput(
                f"a batched sampler returned {out.dtype} {out.shape}, not ({size},) int"
            )
        if np.any((out < 0) | (out >= case.vocab)):
            raise InvalidOutput(f"returned a token outside 0..{case.vocab - 1}")
        tokens[start : start + size] = out
    return tokens


def _tree_call(
    sampler: Sampler, case: TreeCase, tokens: np.ndarray, p: FloatArray, q: FloatArray, rng: Any
) -> object:
    if getattr(sampler, "batched", False):  # one row of a batch
        out = sampler(tokens[None].copy(), case.parents.copy(), p[None].copy(), q[None].copy(), rng)
        nodes, bonus = _checked_batch(out, case, 1)
        return [int(v) for v in nodes[0] if v >= 0], int(bonus[0])
    return sampler(tokens.copy(), case.parents.copy(), p.copy(), q.copy(), rng)


def exact(sampler: Sampler, case: Case) -> Observation:
    """The sampler's exact law on ``case`` by branching its generator over every drafted
    tuple or tree (:func:`otlp.referee.symbolic.exact_law`), within a budget of
    :data:`MAX_CASE_RUNS` replays and :data:`MAX_CASE_SECONDS` seconds; raises
    :class:`~otlp.referee.symbolic.NotEnumerable` when it cannot be followed (``case_only``
    when the case is too large: too many drafted tuples or trees, the budget spent)."""
    if case.draft_count() > MAX_EXACT_DRAFTS:
        raise NotEnumerable(
            f"more than {MAX_EXACT_DRAFTS} drafted tuples or trees in a case", case_only=True
        )
    budget = ReplayBudget(MAX_CASE_RUNS, MAX_CASE_SECONDS)
    law = np.zeros(case.target.shape[0])
    acceptance = 0.0
    if isinstance(case, PositionCase):
        for omega, mass in _checked(case.drafts()):
            drafts = np.array(omega, dtype=np.int64)
            local = exact_law(partial(_position_call, sampler, case, drafts), budget=budget)
            for value, prob in local.items():
                token = _token(value, case.vocab)
                law[token] += mass * prob
                acceptance += mass * prob * (token in omega)
        return Observation(law, acceptance, 0)
    for tokens, mass in _checked(case.drafts()):
        p, q = case.context_laws(tokens)
        call = partial(_tree_call, sampler, case, tokens, p, q)
        local = exact_law(call, key=_tree_output_key, budget=budget)
        for output, prob in local.items():
            seq = emitted(case, tokens, output)
            law += mass * prob * case.completion(seq)
            acceptance += mass * prob * len(seq)
    return Observation(law, acceptance, 0)


def _checked(drafts: Iterator[tuple[Any, float]]) -> list[tuple[Any, float]]:
    """The drafts' enumeration, checked to carry the whole probability (to 1e-12)."""
    items = list(drafts)
    total = math.fsum(mass for _, mass in items)
    if abs(total - 1.0) > 1e-12:
        raise AssertionError(f"the drafts' probabilities sum to {total!r}")
    return items


def _tree_output_key(value: object) -> Any:
    try:
        return tree_key(value)
    except (TypeError, ValueError):
        raise InvalidOutput(f"returned {value!r}, not (nodes, bonus)") from None


def sample(
    sampler: Sampler, case: Case, samples: int, rng: np.random.Generator, bin_of: np.ndarray
) -> Observation:
    """The binned empirical law of ``samples`` draws (drafts by the referee, then the sampler
    with the same generator); for trees the mean of the completions' binned laws."""
    bins = int(bin_of.max()) + 1
    if isinstance(case, PositionCase):
        all_drafts = case.sample_drafts(rng, samples)
        tokens = _position_draws(sampler, case, all_drafts, rng)
        accepted = np.count_nonzero(np.any(all_drafts == tokens[:, None], axis=1))
        law = np.bincount(bin_of[tokens], minlength=bins).astype(np.float64) / samples
        return Observation(law, accepted / samples, samples)
    if getattr(sampler, "batched", False):
        return _batched_tree_sample(sampler, case, samples, rng, bin_of)
    total = np.zeros(bins)
    length = 0
    laws: dict[tuple[int, ...], tuple[FloatArray, FloatArray]] = {}
    completions: dict[tuple[int, ...], FloatArray] = {}
    for _ in range(samples):
        tokens = case.sample_tree(rng)
        key = tuple(int(t) for t in tokens)
        if key not in laws:
            laws[key] = case.context_laws(tokens)
        p, q = laws[key]
        seq = emitted(case, tokens, _tree_call(sampler, case, tokens, p, q, rng))
        if seq not in completions:
            binned = np.bincount(bin_of, weights=case.completion(seq), minlength=bins)
            completions[seq] = np.asarray(binned, dtype=np.float64)
        total += completions[seq]
        length += len(seq)
    return Observation(total / samples, length / samples, samples)


def _batched_tree_sample(
    sampler: Sampler, case: TreeCase, samples: int, rng: np.random.Generator, bin_of: np.ndarray
) -> Observation:
    """:func:`sample` for a batched tree sampler, vectorised: :data:`BATCH` trees drafted at
    once (:meth:`TreeCase.sample_trees`), one call, the outputs checked as arrays and the
    emitted sequences grouped, so the referee's own cost per draw stays small beside the
    sampler's."""
    bins = int(bin_of.max()) + 1
    depths = case.context_depths()
    total = np.zeros(bins)
    length = 0
    completions: dict[tuple[int, ...], FloatArray] = {}
    for start in range(0, samples, BATCH):
        size = min(BATCH, samples - start)
        tokens, rows = case.sample_trees(rng, size)
        p = np.stack([case.target_tables[d][rows[:, c]] for c, d in enumerate(depths)], axis=1)
        q = np.stack([case.draft_tables[d][rows[:, c]] for c, d in enumerate(depths)], axis=1)
        nodes, bonus = _checked_batch(
            sampler(tokens.copy(), case.parents.copy(), p, q, rng), case, size
        )
        accepted = (nodes >= 0).sum(axis=1)
        seqs = np.where(nodes >= 0, np.take_along_axis(tokens, np.maximum(nodes, 0), 1), -1)
        seqs = np.concatenate([seqs, np.full((size, 1), -1, dtype=np.int64)], axis=1)
        seqs[np.arange(size), accepted] = bonus
        unique, counts = np.unique(seqs, axis=0, return_counts=True)
        for seq_row, count in zip(unique, counts, strict=True):
            seq = tuple(int(t) for t in seq_row if t >= 0)
            if seq not in completions:
                binned = np.bincount(bin_of, weights=case.completion(seq), minlength=bins)
                completions[seq] = np.asarray(binned, dtype=np.float64)
            total += count * completions[seq]
            length += int(count) * len(seq)
    return Observation(total / samples, length / samples, samples)


def _checked_batch(output: Any, case: TreeCase, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """A batched tree sampler's ``(nodes, bonus)`` as int64 arrays (rows, L) and (rows,),
    checked: -1 padding only at a row's end, every row a root-to-node path of the tree, bonus
    tokens in the vocabulary (:class:`InvalidOutput` otherwise)."""
    try:
        nodes_out, bonus_out = output
        nodes = np.asarray(nodes_out)
        bonus = np.asarray(bonus_out)
    except (TypeError, ValueError):
        raise InvalidOutput(
            f"a batched tree sampler returned {output!r}, not (nodes, bonus)"
        ) from None
    if (
        nodes.ndim != 2
        or nodes.shape[0] != rows
        or bonus.shape != (rows,)
        or not np.issubdtype(nodes.dtype, np.integer)
        or not np.issubdtype(bonus.dtype, np.integer)
    ):
        raise InvalidOutput(
            f"a batched tree sampler returned nodes {nodes.dtype} {nodes.shape} and bonus "
            f"{bonus.dtype} {bonus.shape}, not int ({rows}, L) and ({rows},)"
        )
    nodes = nodes.astype(np.int64)
    bonus = bonus.astype(np.int64)
    valid = nodes >= 0
    if np.any(valid[:, 1:] & ~valid[:, :-1]) or np.any(nodes >= case.parents.shape[0]):
        raise InvalidOutput("accepted nodes: the -1 padding must end each row, nodes in the tree")
    previous = np.concatenate([np.full((rows, 1), -1), nodes[:, :-1]], axis=1)
    parents = case.parents[np.maximum(nodes, 0)]
    if np.any(valid & (parents != previous)):
        raise InvalidOutput("accepted nodes: a row is not a root-to-node path")
    if np.any((bonus < 0) | (bonus >= case.vocab)):
        raise InvalidOutput(f"returned a bonus token outside 0..{case.vocab - 1}")
    return nodes, bonus
