"""Numba kernels of global resolution ([GR] §6 and Appendices H-L) for i.i.d. drafts.

* :mod:`polymatroid` — outer residual targets by the greedy polymatroid algorithm with
  cumulative minimums (Theorem 6.2), and the tight-set blocks of the outer system.
* :mod:`softmax_system` — the convex problems Φ (outer, per block) and Θ (inner) and their
  receipts/Hessians for all draft sets at once, via exponential sums (:mod:`expsum`).
* :mod:`grouped` — the seed's grouped-coefficient value and gradient over explicit sets.
* :mod:`newton` — damped Newton with the exact Hessian (dense or Woodbury).
* :mod:`lbfgs` — the seed's L-BFGS-B configuration (reference).

The kernels call each other across modules: :mod:`solvers` clears their numba cache whenever
any of its sources changes (:func:`otlp.solvers.kernel_cache.refresh`), before they load.
"""

from otlp.solvers.global_resolution.grouped import GroupedObjective
from otlp.solvers.global_resolution.lbfgs import lbfgs
from otlp.solvers.global_resolution.newton import MinimizeResult, newton
from otlp.solvers.global_resolution.polymatroid import OuterTargets, outer_targets
from otlp.solvers.global_resolution.softmax_system import (
    ALPHA_LIMIT,
    Evaluation,
    SoftmaxSystem,
    evaluate,
)

__all__ = [
    "ALPHA_LIMIT",
    "Evaluation",
    "GroupedObjective",
    "MinimizeResult",
    "OuterTargets",
    "SoftmaxSystem",
    "evaluate",
    "lbfgs",
    "newton",
    "outer_targets",
]
