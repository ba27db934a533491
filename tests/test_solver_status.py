"""Every backend reports scipy's status codes (0 optimal, 1 limit, 2 infeasible, 3 unbounded,
4 other) with its own word kept in ``raw_status``; ``success`` is ``status == 0``."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from otlp.solvers import get_backend
from otlp.solvers.base import LinearProgram, MaxFlowProblem, SolveResult, Status, TransportProblem

OPTIMAL_LP = LinearProgram(np.array([1.0, 1.0]), A_ub=sp.csr_matrix(np.eye(2)), b_ub=np.ones(2))
# x0 + x1 <= 1 and x0 + x1 >= 2 (as -x0 - x1 <= -2): no x >= 0 meets both
INFEASIBLE_LP = LinearProgram(
    np.array([1.0, 1.0]),
    A_ub=sp.csr_matrix(np.array([[1.0, 1.0], [-1.0, -1.0]])),
    b_ub=np.array([1.0, -2.0]),
)
UNBOUNDED_LP = LinearProgram(
    np.array([1.0, 0.0]), A_ub=sp.csr_matrix(np.array([[0.0, 1.0]])), b_ub=np.ones(1)
)


def test_status_codes_are_scipy_linprog_codes() -> None:
    assert [int(s) for s in Status] == [0, 1, 2, 3, 4]
    assert Status.OPTIMAL == 0 and Status.INFEASIBLE == 2  # plain ints, as in scipy


@pytest.mark.parametrize("backend", ["highs", "cvxpy"])
@pytest.mark.parametrize(
    ("problem", "status"),
    [
        (OPTIMAL_LP, Status.OPTIMAL),
        (INFEASIBLE_LP, Status.INFEASIBLE),
        (UNBOUNDED_LP, Status.UNBOUNDED),
    ],
)
def test_linear_programs_map_their_status(
    backend: str, problem: LinearProgram, status: Status
) -> None:
    result = get_backend(backend).solve(problem)
    assert result.status == status, result.raw_status
    assert result.success is (status == Status.OPTIMAL)
    assert isinstance(result.raw_status, str) and result.raw_status
    if result.success:
        assert result.objective == pytest.approx(2.0)


def test_a_highs_time_limit_is_status_one_with_the_word_kept() -> None:
    rng = np.random.default_rng(0)
    size = 60
    cost = rng.random(size * size)
    rows = sp.kron(sp.eye(size), np.ones((1, size)))
    cols = sp.kron(np.ones((1, size)), sp.eye(size))
    lp = LinearProgram(
        cost, A_eq=sp.csr_matrix(sp.vstack([rows, cols])), b_eq=np.ones(2 * size), maximize=False
    )
    result = get_backend("highs").solve(lp, time_limit=1e-9, presolve=False)
    assert result.status == Status.LIMIT_REACHED and not result.success
    assert result.raw_status == "Time limit reached"


def test_flow_and_transport_backends_report_optimal() -> None:
    network = MaxFlowProblem(
        3,
        np.array([0, 1], dtype=np.int64),
        np.array([1, 2], dtype=np.int64),
        np.array([1.0, 0.5]),
        0,
        2,
    )
    for name in ("ortools-maxflow", "networkx-maxflow"):
        result = get_backend(name).solve(network)
        assert result.status == 0 and result.success, (name, result.raw_status)
        assert result.objective == pytest.approx(0.5)
    transport = TransportProblem(np.array([0.5, 0.5]), np.array([0.5, 0.5]), 1.0 - np.eye(2))
    result = get_backend("pot").solve(transport)
    assert (result.status, result.raw_status, result.success) == (0, "optimal", True)


def test_success_follows_the_status() -> None:
    result = SolveResult("x", Status.INFEASIBLE, "nope", np.nan, np.zeros(0), 0.0)
    assert not result.success
    result.status = Status.OPTIMAL
    assert result.success


def test_a_further_backend_joins_the_table_by_register() -> None:
    from otlp.solvers import registry
    from otlp.solvers.base import Backend

    class Echo(Backend):
        name = "echo-test"
        accepts = (LinearProgram,)
        requires = ("numpy",)

        def solve(self, problem: LinearProgram, **unknown: object) -> SolveResult:
            self.reject_unknown(dict(unknown))
            x = np.zeros(problem.num_variables)
            return SolveResult(self.name, Status.OPTIMAL, "done", 0.0, x, 0.0)

    assert registry.register(Echo) is Echo
    try:
        assert "echo-test" in registry.backend_names()
        assert "echo-test" in registry.available_backends()
        assert get_backend("echo-test").solve(OPTIMAL_LP).success
        with pytest.raises(ValueError, match="backend 'echo-test': unknown option"):
            get_backend("echo-test").solve(OPTIMAL_LP, bogus=1)
    finally:
        registry._TABLE.pop("echo-test")
    with pytest.raises(ValueError, match="backend: unknown 'echo-test'"):
        get_backend("echo-test")
