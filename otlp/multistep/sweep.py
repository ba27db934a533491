"""Block efficiency of each method against block length L and path count K, with the LP
optimum of [GBV] (Theorem 3.3 for K = 1, Theorem 4.3 for K > 1) beside it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from otlp.args import integers
from otlp.multistep.exact import METHODS, SINGLE_PATH, output_law
from otlp.multistep.lp import multi_path_lp
from otlp.multistep.models import Model
from otlp.multistep.simulate import simulate
from otlp.multistep.table import tabulate
from otlp.multistep.verifiers import SingleStepVerifier, get_verifier

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
    exact: bool = True,
    lp: bool = True,
    calls: int = 0,
    decode: bool = False,
    seed: int = 0,
    rules: Mapping[str, str | SingleStepVerifier] | None = None,
    ranking: str = "ratio",
    on_cell: Callable[[str, int, int], None] | None = None,
) -> list[EfficiencyRow]:
    """Block efficiency of every method for every (K, L).

    Single-path methods run only at K = 1; ``"spectr"`` runs once per entry of ``rules``
    (label -> rule name or single-step verifier; default ``{"ot": "ot"}``), labelled
    ``spectr:label``. ``exact`` adds the enumerated values (source "exact"), ``lp`` the LP
    optimum ("lp"); ``calls`` > 0 adds Monte Carlo estimates ("simulation") from that many
    calls, each from the empty context, or one decoding run with ``decode``. ``on_cell(label,
    K, L)`` is called after each method's (K, L) cell (progress display).
    """
    gammas = _non_empty("gammas", integers("gammas", gammas, minimum=1))
    paths = _non_empty("paths", integers("paths", paths, minimum=1))
    if (
        isinstance(methods, str)
        or not isinstance(methods, Iterable)
        or not all(isinstance(m, str) for m in methods)
    ):
        raise ValueError(f"methods: expected a sequence of method names, got {methods!r}")
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"methods: unknown {', '.join(unknown)}; known: {', '.join(METHODS)}")
    runs: list[tuple[str, str, dict[str, Any]]] = []
    for method in methods:
        if method == "spectr":
            for name, rule in (rules or {"ot": "ot"}).items():
                verifier = get_verifier(rule)  # one plan cache per rule for the whole sweep
                runs.append((method, f"spectr:{name}", {"rule": verifier}))
        else:
            runs.append((method, method, {"ranking": ranking}))
    if exact or lp:
        depth = max(gammas) + 1
        tgt, dft = tabulate(target, depth, name="target"), tabulate(draft, depth, name="draft")
    rows = []
    for k in paths:
        for gamma in gammas:
            for method, label, options in runs:
                if method in SINGLE_PATH and k != 1:
                    continue
                if exact:
                    law = output_law(tgt, dft, gamma, method, k, **options)
                    rows.append(EfficiencyRow(label, k, gamma, law.block_efficiency, "exact"))
                if calls:
                    restart = not decode
                    run = simulate(
                        target,
                        draft,
                        gamma,
                        method,
                        k,
                        calls=calls,
                        seed=seed,
                        restart=restart,
                        **options,
                    )
                    rows.append(
                        EfficiencyRow(
                            label, k, gamma, run.block_efficiency, "simulation", run.stderr
                        )
                    )
                if on_cell is not None:
                    on_cell(label, k, gamma)
            if lp:
                result = multi_path_lp(tgt, dft, gamma, k)
                rows.append(EfficiencyRow(LP_LABEL, k, gamma, result.block_efficiency, "lp"))
    return rows


def _non_empty(name: str, values: tuple[int, ...]) -> tuple[int, ...]:
    if not values:
        raise ValueError(f"{name}: expected at least one value")
    return values
