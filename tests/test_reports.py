"""One result model: the reports of global resolution share one base, and a token's report
is the solve report of its unit plus what is particular to the token."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import otlp
from otlp.decoder_rows.result import RowReport
from otlp.global_resolution.reports import SolveReport, TokenReport, UnitReport
from otlp.verification.position import RowReport as OldPathRowReport

BASE = [f.name for f in dataclasses.fields(UnitReport)]


def test_every_report_is_composed_from_the_one_base() -> None:
    assert issubclass(TokenReport, SolveReport) and issubclass(SolveReport, UnitReport)
    assert issubclass(RowReport, UnitReport) and OldPathRowReport is RowReport
    for cls in (SolveReport, TokenReport, RowReport):
        own = [f.name for f in dataclasses.fields(cls)]
        assert own[: len(BASE)] == BASE, cls
        assert len(own) == len(set(own)), cls  # no field defined twice


def test_a_token_report_is_its_units_solve_report() -> None:
    rng = np.random.default_rng(5)
    inst = otlp.Instance(rng.dirichlet(np.ones(8)), rng.dirichlet(np.ones(8)), 3)
    plan = otlp.solve(inst, "global_resolution", tau=1e-4, check=False)
    for omega in ([0, 1, 2], [0, 0, 0], [7, 6, 5]):
        _, token = plan.token_report(omega)
        engine = plan.engine
        unit = engine.unit_of(inst.to_local(omega))
        solved = engine.reports[unit]
        assert token.omega == tuple(omega)
        for name in [f.name for f in dataclasses.fields(SolveReport)]:
            if name != "seconds":
                assert getattr(token, name) == getattr(solved, name), name
    assert plan.token_report([0, 1, 2])[1].cached


def test_of_unit_takes_the_tokens_own_time() -> None:
    unit = SolveReport(
        system="inner",
        block=None,
        variables=3,
        iterations=4,
        deviation=1e-6,
        fallback=False,
        message="converged",
        truncation_error=0.0,
        grad_norm=1e-7,
        seconds=2.0,
    )
    token = TokenReport.of_unit(unit, omega=(1, 2), seconds=0.5, cached=True)
    assert (token.seconds, token.iterations, token.omega, token.cached) == (0.5, 4, (1, 2), True)


def test_the_lazy_plan_materialises_through_properties_on_first_access() -> None:
    from otlp.global_resolution.plan import GlobalResolutionPlan

    lazy = ("columns", "explicit", "row_residual", "col_residual")
    assert all(isinstance(getattr(GlobalResolutionPlan, name), property) for name in lazy)
    assert "__getattr__" not in vars(GlobalResolutionPlan)
    rng = np.random.default_rng(2)
    inst = otlp.Instance(rng.dirichlet(np.ones(10)), rng.dirichlet(np.ones(10)), 2)
    plan = otlp.solve(inst, "global_resolution", tau=1e-4, check=False)
    plan.local_slice([0, 1])
    assert "units" not in plan.info and len(plan.engine.reports) < len(plan.engine.units())
    mass = float(plan.explicit.sum() + plan.row_residual.sum())  # materialises everything
    assert mass == pytest.approx(1.0, abs=1e-3)
    assert set(plan.info["units"]) == set(plan.engine.units())
    assert plan.columns.count == plan.explicit.shape[1] == plan.col_residual.shape[0]
    assert otlp.verify(plan).ok
