"""[GBV] Theorem 4.6's optimal path selection (otlp.multistep.optimal) on enumerated tiny trees."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from otlp.multistep import model_pair, multi_path_lp, optimal_path_selection, tabulate
from otlp.multistep.gbv import skewed_law
from otlp.multistep.optimal import realisability_violation, skewed_objective


@pytest.mark.parametrize("paths", [2, 3])
def test_optimum_beats_every_greedy_ranking_and_equals_the_antichain_lp(paths: int) -> None:
    """Every global ranking's skewed draft (a base-polytope vertex) is realisable and does no
    better; on this instance the optimum is strictly better than all of them (interior)."""
    target, draft = model_pair("tree", 2, seed=5, distance=0.9, depth=3)
    tgt, dft = tabulate(target, 3), tabulate(draft, 2)
    opt = optimal_path_selection(tgt, dft, 2, paths)
    mass = dft.joint(2)
    vertices = [skewed_law(mass, np.array(o), paths) for o in itertools.permutations(range(4))]
    assert max(realisability_violation(v, mass, paths) for v in vertices) < 1e-12
    best = max(skewed_objective(tgt, v, 2) for v in vertices)
    assert opt.expected_accepted > best + 1e-3
    lp = multi_path_lp(tgt, dft, 2, paths)
    assert opt.expected_accepted == pytest.approx(lp.expected_accepted, abs=1e-9)


def test_refuses_more_than_twelve_paths() -> None:
    target, draft = model_pair("context-free", 4, seed=0, depth=3)
    with pytest.raises(ValueError, match="gamma"):
        optimal_path_selection(target, draft, 2, 2)
