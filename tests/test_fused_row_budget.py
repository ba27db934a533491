"""The compiled decoder row keeps a unit's slice only within its budget ([GR] §6.3: 5 tau,
an outer block its share): a row whose certified deviation exceeds the budget falls back to
the exact solve, however little it exceeds it."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import otlp
from otlp.instances import dirichlet_pair
from tests.test_guarantees import _budget_shares, _four_outer_blocks, _gr_plan


def test_rows_beyond_their_budget_fall_back() -> None:
    """Rows stopped after 1-3 Newton iterations: every row reported as kept has deviation
    <= budget; and some rows land between 1x and 2x their budget (so a kernel that kept a
    slice up to twice its budget is caught)."""
    between = 0
    for seed in range(4):
        p, q = dirichlet_pair(12, seed=seed)
        drafts = otlp.Instance(p, q, 2).sample_drafts(np.random.default_rng(seed), 60)
        for max_iter in (1, 2, 3):
            result = otlp.verify_drafts(
                p, q, drafts, tau=1e-4, max_iter=max_iter, rng=0, method="global_resolution"
            )
            for report in result.reports:
                assert report.fallback == (not report.deviation <= report.budget)
                between += report.budget < report.deviation <= 2 * report.budget
    assert between > 0


def test_an_outer_block_keeps_its_slice_only_within_its_share_of_5_tau() -> None:
    """[GR] §6.3 in the compiled row: an outer block's budget is its share of 5 tau, not the
    whole 5 tau. On an instance whose outer system has two blocks to solve, tau is set so that
    block 3's first Newton iterate is within 5 tau but not within its share (the share from
    the test's own formula, ``_budget_shares``): after one iteration the row falls back."""
    inst = _four_outer_blocks()
    share = _budget_shares(_gr_plan(1e-3, inst=inst))[3]
    assert share < 1.0

    def reports(drafts: np.ndarray, tau: float) -> tuple:
        result = otlp.verify_drafts(
            inst.p,
            inst.q,
            drafts,
            tau=tau,
            max_iter=1,
            time_budget=None,
            rng=0,
            method="global_resolution",
        )
        return result.reports

    pairs = np.array(list(itertools.product(range(inst.p.shape[0]), repeat=inst.n)))
    row, first = next(
        (b, r) for b, r in enumerate(reports(pairs, 1e-8)) if (r.system, r.block) == ("outer", 3)
    )
    assert first.iterations == 1 and first.deviation > 0
    drafts = pairs[row : row + 1]
    tau = first.deviation / (5.0 * np.sqrt(share))  # 5 tau share < deviation < 5 tau
    (report,) = reports(drafts, tau)
    assert (report.system, report.block) == ("outer", 3)
    assert 5.0 * tau * share < report.deviation <= 5.0 * tau  # within 5 tau, not the share
    assert report.budget == pytest.approx(5.0 * tau * share, rel=1e-12)
    assert report.fallback
