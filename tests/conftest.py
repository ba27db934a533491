"""Test-suite set-up: the hypothesis profile (``ci`` by default, derandomised; see
tests/profiles.py and docs/testing.md) and the numba kernels compiled before any test."""

import pytest

from tests import profiles

profiles.load()


@pytest.fixture(scope="session", autouse=True)
def _kernels_compiled_ahead() -> None:
    """Compile (or load) every kernel a budgeted call runs before the first test, as a
    decoder does at start-up (:func:`otlp.warm_up`). A call's ``time_budget`` counts numba's
    compilation (issue 39), so on a fresh clone without a kernel cache the first test to reach
    a kernel spent the 5 s default budget compiling and served some rows by the lossless rule:
    a law test then mixed two couplings and failed, depending on test order
    (``test_each_node_method_is_lossless_by_enumeration[global_resolution-without_replacement-wor3]``:
    0.0033 from p in L1 against 15 tau = 0.0015). The cold-call behaviour itself is tested in
    fresh child processes (tests/test_gr_budget.py)."""
    import otlp

    otlp.warm_up()
