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


LIFTED_CALL_LIMIT = 86_400.0  # seconds: the referee's per-call limit in the tests (a day)


@pytest.fixture(autouse=True)
def _referee_call_limit_lifted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The referee's per-call limit (``otlp.referee.clock.DEFAULT_CALL_LIMIT``, 10 s) lifted
    to a day in every test: a loaded machine, or numba compiling in a sampler's first call,
    must not turn a verdict into a timeout error. ``referee()`` and ``replay()`` bound the
    default when they were defined (their keyword defaults), the command line reads the
    module's constant at each run: all three are patched. The limit stays armed (the sampler
    still runs wrapped, as it does for a user); the tests of the limit itself pass
    ``call_limit`` / ``--call-limit`` explicitly (tests/test_referee_limits.py)."""
    from otlp.referee import clock, judge

    monkeypatch.setattr(clock, "DEFAULT_CALL_LIMIT", LIFTED_CALL_LIMIT)
    for function in (judge.referee, judge.replay):
        monkeypatch.setitem(function.__kwdefaults__, "call_limit", LIFTED_CALL_LIMIT)
