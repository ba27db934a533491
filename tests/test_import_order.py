"""highspy, ortools and cvxpy must load together in any order (a pitfall found on this machine;
see docs/design.md)."""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest

MODULES = ("highspy", "ortools.graph.python.max_flow", "cvxpy")
EXERCISE = (
    "import numpy as np, highspy\n"
    "from ortools.graph.python import max_flow\n"
    "h = highspy.Highs(); h.setOptionValue('output_flag', False)\n"
    "f = max_flow.SimpleMaxFlow(); f.add_arc_with_capacity(0, 1, 3)\n"
    "assert f.solve(0, 1) == f.OPTIMAL and f.optimal_flow() == 3\n"
    "import cvxpy as cp; x = cp.Variable(nonneg=True)\n"
    "cp.Problem(cp.Maximize(x), [x <= 2]).solve(solver='HIGHS')\n"
    "assert abs(x.value - 2) < 1e-9\n"
)


@pytest.mark.parametrize("order", list(itertools.permutations(MODULES)))
def test_fresh_interpreter_imports_in_any_order(order: tuple[str, ...]) -> None:
    code = "".join(f"import {m}\n" for m in order) + EXERCISE
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
