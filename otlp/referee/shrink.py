"""Shrinking a failing case to a minimal one, hypothesis-style: try simpler candidates in
order (fewer drafts, fewer nodes, fewer tokens, then simpler masses) and keep the first that
still fails, until none does.

A candidate is always a valid case of the same protocol and scheme: laws renormalised after
a token is dropped, the draft able to produce the drafts (n distinct tokens without
replacement), masses rounded to 1, 2 or 3 decimals without turning a zero into a positive
mass or a positive one into zero.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np

from otlp.referee.cases import Case, PositionCase, TreeCase

MAX_STEPS = 60  # accepted shrinks (each one makes the case strictly simpler)
MAX_DROPPED = 16  # up to this vocabulary, tokens are dropped one at a time
TOP_K = (2, 4, 8, 16)  # beyond it, the case is first restricted to its likeliest tokens


def shrink(case: Case, fails: Callable[[Case], bool], max_tries: int = 400) -> Case:
    """The simplest case reached from ``case`` by candidates on which ``fails`` holds."""
    tries = 0
    for _ in range(MAX_STEPS):
        for candidate in candidates(case):
            tries += 1
            if tries > max_tries:
                return case
            if fails(candidate):
                case = candidate
                break
        else:
            return case
    return case


def relabelled(minimal: Case, original: Case) -> Case:
    """``minimal`` labelled by what it is now (its sizes) and what it was shrunk from: the
    label a shrunk case carries into the verdict and the reproducer."""
    if minimal is original:
        return minimal
    if isinstance(minimal, PositionCase):
        size = f"V={minimal.vocab} n={minimal.n}"
    else:
        size = f"V={minimal.vocab} parents={minimal.parents.tolist()}"
    origin = original.label or "the failing case"
    return replace(minimal, label=f"{size}, shrunk from {origin}")


def candidates(case: Case) -> Iterator[Case]:
    if isinstance(case, PositionCase):
        yield from _position_candidates(case)
    else:
        yield from _tree_candidates(case)


def _normalised(rows: np.ndarray) -> np.ndarray | None:
    totals = rows.sum(axis=-1, keepdims=True)
    if np.any(totals <= 0):
        return None
    return rows / totals


def _rounded(values: np.ndarray, digits: int) -> np.ndarray | None:
    step = 10.0**-digits
    out = np.where(values > 0, np.maximum(np.round(values, digits), step), 0.0)
    normalised = _normalised(out)
    if normalised is None or np.allclose(normalised, values, rtol=0, atol=1e-15):
        return None
    return normalised


def _position_candidates(case: PositionCase) -> Iterator[PositionCase]:
    independent = case.scheme == "independent"
    for k in TOP_K:  # a real vocabulary: its likeliest tokens first
        if k < case.vocab > MAX_DROPPED:
            yield from _restricted(
                case, np.argsort(-(case.p + case.q.reshape(-1, case.vocab).sum(0)))[:k]
            )
    if case.n > (2 if independent else 1):
        q = case.q[:-1] if independent else case.q
        yield PositionCase(case.p, q, case.n - 1, case.scheme, case.label)
    if 2 < case.vocab <= MAX_DROPPED:
        for token in range(case.vocab):
            yield from _restricted(case, np.delete(np.arange(case.vocab), token))
    for digits in (1, 2, 3):
        for which in ("p", "q"):
            values = case.p if which == "p" else case.q
            rounded = _rounded(values, digits)
            if rounded is None:
                continue
            if which == "p":
                yield PositionCase(rounded, case.q, case.n, case.scheme, case.label)
            elif case.scheme != "without_replacement" or np.count_nonzero(rounded) >= case.n:
                yield PositionCase(case.p, rounded, case.n, case.scheme, case.label)


def _restricted(case: PositionCase, tokens: np.ndarray) -> Iterator[PositionCase]:
    keep = np.sort(tokens)
    p, q = _normalised(case.p[keep]), _normalised(case.q[..., keep])
    if p is None or q is None:
        return
    if case.scheme == "without_replacement" and np.count_nonzero(q) < case.n:
        return
    yield PositionCase(p, q, case.n, case.scheme, case.label)


def _tree_candidates(case: TreeCase) -> Iterator[TreeCase]:
    has_child = np.zeros(case.parents.shape[0], dtype=bool)
    has_child[case.parents[case.parents >= 0]] = True
    for leaf in np.flatnonzero(~has_child)[::-1]:
        if case.parents.shape[0] == 1:
            break
        keep = np.arange(case.parents.shape[0]) != leaf
        parents = case.parents[keep]
        parents = np.where(parents > leaf, parents - 1, parents)
        smaller = TreeCase(case.target_tables, case.draft_tables, parents, case.scheme, case.label)
        levels = smaller.depth + 1
        yield TreeCase(
            case.target_tables[:levels],
            case.draft_tables[:levels],
            parents,
            case.scheme,
            case.label,
        )
    if case.vocab > 2:
        for token in range(case.vocab):
            dropped = _drop_token(case, token)
            if dropped is not None:
                yield dropped
    for digits in (1, 2, 3):
        for which in ("target", "draft"):
            tables = case.target_tables if which == "target" else case.draft_tables
            rounded = [_rounded(t, digits) for t in tables]
            if any(r is None for r in rounded):
                continue
            new = tuple(r for r in rounded if r is not None)
            if which == "target":
                yield TreeCase(new, case.draft_tables, case.parents, case.scheme, case.label)
            else:
                yield TreeCase(case.target_tables, new, case.parents, case.scheme, case.label)


def _drop_token(case: TreeCase, token: int) -> TreeCase | None:
    """The case without ``token``: prefixes containing it and its column removed."""
    vocab = case.vocab
    keep = np.arange(vocab) != token
    target, draft = [], []
    for d, (t, q) in enumerate(zip(case.target_tables, case.draft_tables, strict=True)):
        rows = np.ones(1, dtype=bool)
        for _ in range(d):  # prefixes of length d in base-V order, without ``token``
            rows = (rows[:, None] & keep[None, :]).reshape(-1)
        nt, nq = _normalised(t[rows][:, keep]), _normalised(q[rows][:, keep])
        if nt is None or nq is None:
            return None
        target.append(nt)
        draft.append(nq)
    try:  # without replacement, a draft left with too few tokens is refused
        return TreeCase(tuple(target), tuple(draft), case.parents, case.scheme, case.label)
    except ValueError:
        return None
