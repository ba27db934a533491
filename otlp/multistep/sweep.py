"""Block efficiency of each method against block length L and path count K, with the LP
optimum of seed 002 (Theorem 3.3 for K = 1, Theorem 4.3 for K > 1) beside it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from otlp.multistep.exact import METHODS, SINGLE_PATH, output_law
from otlp.multistep.lp import multi_path_lp
from otlp.multistep.models import Model
from otlp.multistep.simulate import simulate
from otlp.multistep.table import tabulate

LP_LABEL = "lp-optimum"


@dataclass(frozen=True)
class EfficiencyRow:
    """One (method, K, L) cell; ``source`` is "exact", "lp" or "simulation"."""

    method: str
    paths: int
    gamma: int
    block_efficiency: float
    source: str
    stderr: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def efficiency_sweep(
    target: Model,
    draft: Model,
    gammas: Sequence[int],
    paths: Sequence[int],
    methods: Sequence[str] = METHODS,
    *,
    lp: bool = True,
    calls: int = 0,
    seed: int = 0,
    **options: Any,
) -> list[EfficiencyRow]:
    """Exact block efficiency of every method for every (K, L); single-path methods only at
    K = 1. With ``lp`` the LP optimum is added; with ``calls`` > 0 Monte Carlo estimates from
    that many restarted calls are added too (source "simulation")."""
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"methods: unknown {', '.join(unknown)}; known: {', '.join(METHODS)}")
    depth = max(gammas) + 1
    tgt, dft = tabulate(target, depth, name="target"), tabulate(draft, depth, name="draft")
    rows = []
    for k in paths:
        for gamma in gammas:
            for method in methods:
                if method in SINGLE_PATH and k != 1:
                    continue
                law = output_law(tgt, dft, gamma, method, k, **options)
                rows.append(EfficiencyRow(method, k, gamma, law.block_efficiency, "exact"))
                if calls:
                    run = simulate(
                        target,
                        draft,
                        gamma,
                        method,
                        k,
                        calls=calls,
                        seed=seed,
                        restart=True,
                        **options,
                    )
                    rows.append(
                        EfficiencyRow(
                            method, k, gamma, run.block_efficiency, "simulation", run.stderr
                        )
                    )
            if lp:
                result = multi_path_lp(tgt, dft, gamma, k)
                rows.append(EfficiencyRow(LP_LABEL, k, gamma, result.block_efficiency, "lp"))
    return rows
