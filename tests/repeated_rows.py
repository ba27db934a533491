"""One drafted tree verified on many rows at once, for the sampler tests of
:func:`otlp.decoding.verify_tree` (tests/test_verification_tree.py, tests/test_verify_tree_laws.py):
the emitted token sequences counted, to be set against the exact ``outcome_law`` ([GBV]
Definition 3.1: the emitted tokens must follow it)."""

from __future__ import annotations

from typing import Any

import numpy as np

from otlp.decoding import verify_tree


def counts_of(result: Any) -> dict[tuple[int, ...], int]:
    """How often each emitted token sequence came out, over the result's rows."""
    counts: dict[tuple[int, ...], int] = {}
    for b in range(result.num_accepted.shape[0]):
        key = tuple(int(t) for t in result.tokens_out(b))
        counts[key] = counts.get(key, 0) + 1
    return counts


def repeated_row_counts(
    row: np.ndarray, parents: np.ndarray, p: np.ndarray, q: np.ndarray, rows: int, **options: Any
) -> dict[tuple[int, ...], int]:
    """:func:`counts_of` ``rows`` copies of one drafted ``row`` with its laws ``p``, ``q`` (one
    per context; broadcast, not copied) verified by :func:`verify_tree` with ``options``."""
    result = verify_tree(
        np.tile(row, (rows, 1)),
        parents,
        np.broadcast_to(p, (rows, *p.shape)),
        np.broadcast_to(q, (rows, *q.shape)),
        **options,
    )
    return counts_of(result)
