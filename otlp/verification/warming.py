"""Compile ahead: every kernel a budgeted call runs, before the first budgeted call (and
partial resolution's, the i.i.d. default, so that a decoder's first token does not compile).

A call's ``time_budget`` counts from its entry, and numba compiles a kernel (or loads it from
its cache) on its first use in a process: 0.2-0.4 s of CPU for the kernels of a first
``verify_drafts`` call with cached kernels, minutes without a cache. That work counts against
the first call's budget (:mod:`otlp.solvers.global_resolution.budget`), so a first call with a
5 ms budget reports its rows out of time and serves them by the lossless rule. A decoder
calls :func:`warm_up` once at start-up (it is not run at import: ``import otlp`` stays fast
for the uses that never set a budget) and every later call keeps its budget.

What it runs, for every scheme and number of drafts global resolution serves (i.i.d. n = 1,
2, 3; without replacement n = 2, 3; two independent drafts; greedy n = 2): each path a row
can take — the fused row to its token (no budget), the object API's fallback with its exact
max-flow (``max_iter=0``: Newton stops at its limit at once), and the lossless rule of a row
out of time (a budget already spent) — on float64 rows (``verify_drafts`` computes on float64
whatever its inputs' dtype); and the fused kernels on rows of every pair of ``dtypes`` (what
:func:`otlp.verify_tree` hands them: the models' own precision). ``parallel=True`` also
compiles the threaded batch (``verify_drafts(..., parallel=True)``).
``tests/test_gr_budget.py::test_after_warm_up_no_verify_drafts_call_compiles`` checks that
no call of that matrix (top-k or not, every budget, float32 or float64 inputs) compiles
afterwards.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable
from typing import Any, cast

import numpy as np

from otlp.global_resolution.rows import GlobalResolutionRows
from otlp.verification.position import verify_drafts

WARM_VOCAB = 64  # large enough for Newton's units (not a closed form) and BLAS's pinning
# (scheme, draft counts) of every path of verify_drafts' global resolution
WARM_CASES = (
    ("iid", (1, 2, 3)),
    ("without_replacement", (2, 3)),
    ("independent", (2,)),
    ("greedy", (2,)),
)
# (time_budget, max_iter): the fused row, the object API's fallback, the rule out of time
WARM_PATHS = ((None, 50), (None, 0), (1e-9, 50))


def warm_up(
    dtypes: tuple[type, ...] = (np.float64, np.float32), *, parallel: bool = False
) -> float:
    """Compile (or load from numba's cache) every kernel that ``otlp.verify_drafts`` with
    global resolution runs (see the module notes), and return the seconds it took.

    ``dtypes``: the precisions of the rows that :func:`otlp.verify_tree` hands the fused
    kernels (every pair of them); ``parallel``: also the threaded i.i.d. batch.
    """
    start = time.perf_counter()
    dtypes = _check_dtypes(dtypes)
    if not isinstance(parallel, bool):
        raise ValueError(f"parallel: expected True or False, got {parallel!r}")
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.full(WARM_VOCAB, 0.5))
    q = rng.dirichlet(np.full(WARM_VOCAB, 0.5))
    order = np.argsort(-q)
    for scheme, counts in WARM_CASES:
        for n in counts:
            q_arg = q if scheme != "independent" else np.stack([q, q[::-1]])
            drafts = (order[:n] if scheme != "independent" else order[[0, -1]])[None, :]
            for budget, max_iter in WARM_PATHS:
                verify_drafts(
                    p, q_arg, drafts, method="global_resolution", scheme=scheme,
                    time_budget=budget, max_iter=max_iter, rng=0,
                )  # fmt: skip
    for n in (1, 2, 3):  # the i.i.d. default, partial resolution (exact, no budget)
        verify_drafts(p, q, order[None, :n], method="partial_resolution", rng=0)
    if parallel:
        verify_drafts(p, q, order[None, :2], method="global_resolution", parallel=True, rng=0)
    uniforms = np.full((1, 2), 0.5)
    for p_type, q_type in itertools.product(dtypes, repeat=2):
        pd: np.ndarray = p.astype(p_type)
        qd: np.ndarray = q.astype(q_type)
        rows = GlobalResolutionRows()
        rows.fused_node_token(pd, qd, order[:2], uniforms[0], scheme="iid", top_k=None, atol=1e-4)
        for budget in (None, 1e-9):
            rows = GlobalResolutionRows(time_budget=budget)
            rows.fused_node_token(
                pd, qd, order[:2], uniforms[0], scheme="without_replacement", top_k=0, atol=1e-4
            )
    return time.perf_counter() - start


def _check_dtypes(dtypes: object) -> tuple[type, ...]:
    """``dtypes`` as a non-empty tuple of float32 / float64 (the precisions the fused kernels
    compile for), checked before any work; a ``ValueError`` naming ``dtypes`` otherwise."""
    allowed = (np.dtype(np.float32), np.dtype(np.float64))
    try:
        checked = tuple(np.dtype(d) for d in cast(Iterable[Any], dtypes))
    except TypeError:
        raise ValueError(f"dtypes: expected a tuple of float32 / float64, got {dtypes!r}") from None
    if not checked or any(d not in allowed for d in checked):
        raise ValueError(f"dtypes: expected a tuple of float32 / float64, got {dtypes!r}")
    return tuple(d.type for d in checked)
