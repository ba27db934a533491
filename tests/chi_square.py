"""Chi-square goodness of fit for the sampler tests (tests/test_referee_subjects.py,
tests/test_rules_sampling.py): sampled counts against the counts an exact law expects."""

from __future__ import annotations

import numpy as np
from scipy import stats


def chi_square_pvalue(observed: np.ndarray, expected: np.ndarray) -> float:
    """Chi-square goodness of fit, pooling the cells expected to hold fewer than 5 draws; a
    draw in a cell the exact law gives no mass (expected count <= 1e-12) fails outright."""
    observed, expected = observed.ravel(), expected.ravel()
    assert observed[expected <= 1e-12].sum() == 0, "a draw landed where the exact law has no mass"
    small = expected < 5
    obs = np.append(observed[~small], observed[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    keep = exp > 0
    exp = exp[keep] * obs[keep].sum() / exp[keep].sum()
    return float(stats.chisquare(obs[keep], exp).pvalue)
