"""The referee's adapters call partial resolution lossless in exact mode (positions and trees).

A mutation check: the same adapter with each set conditional nudged by 1e-3 towards the
first drafted token is called lossy (the exact mode is sharp enough to see it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from otlp.referee import adapters, referee


def test_partial_resolution_is_lossless_in_the_referees_exact_mode() -> None:
    verdict = referee(adapters.position("partial_resolution"), cases=8, max_n=3, mode="exact")
    assert verdict.lossless and verdict.exact_cases == 8
    assert all(abs(row.acceptance - row.alpha_star) <= 1e-9 for row in verdict.gap)


def test_partial_resolution_trees_are_lossless_in_the_referees_exact_mode() -> None:
    verdict = referee(adapters.tree("partial_resolution"), cases=6, mode="exact")
    assert verdict.lossless and verdict.exact_cases == 6


@dataclass(frozen=True)
class _Nudged(adapters.PositionAdapter):
    """partial_resolution's exact conditional with 1e-3 moved onto the first draft."""

    def conditional(self, p: np.ndarray, q: np.ndarray, drafts: np.ndarray) -> np.ndarray:
        law = super().conditional(p, q, drafts).copy()
        law *= 1.0 - 1e-3
        law[drafts[0]] += 1e-3
        return law


def test_a_nudged_conditional_is_called_lossy() -> None:
    verdict = referee(_Nudged("partial_resolution"), cases=8, max_n=3, mode="exact")
    assert not verdict.lossless
