"""The grid of a benchmark run: cells, the catalog they are checked against, and work groups.

A *cell* is one (suite, scheme, k, n, method or rule, tau) combination measured over the
same ``items`` suite items ("tokens", [GR] §7.2: one solve per token with omega drawn from
the draft). Cells sharing (suite, scheme, k, n) form a *group*: one task that measures all
its methods side by side on each token, so their ratios come from the same moments.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from itertools import product
from typing import Any

import numpy as np

from otlp.bench.config import BenchConfig, MethodSettings, Selection, Sweep, resolve_suite
from otlp.bench.decoder_cells import DECODE, known_decoders, takes_tau
from otlp.columns import column_count
from otlp.instances.suites import suite_names
from otlp.methods import get_method, method_names

ALPHA = "alpha"  # the reference: alpha* by subset selection, computed for every token
METHOD = "method"  # an otlp.solve method: plan -> otlp.verify
RULE = "rule"  # an otlp.rules rule: exact acceptance
ALPHA_NAME = "alpha*"


@dataclass(frozen=True)
class Cell:
    """One measured combination; ``id`` keys it in the results file."""

    suite: str
    scheme: str
    k: int
    n: int
    kind: str
    name: str
    tau: float | None
    items: int
    seed: int
    repeats: int = 1
    options: tuple[tuple[str, Any], ...] = ()
    select: Selection = ()

    @property
    def label(self) -> str:
        """Column heading: the method or rule name, with its tau."""
        return self.name if self.tau is None else f"{self.name} τ={self.tau:g}"

    @property
    def group(self) -> tuple[Any, ...]:
        return (self.suite, self.scheme, self.k, self.n, self.items, self.select, self.seed)

    @property
    def id(self) -> str:
        parts = [self.suite, self.scheme, f"k={self.k}", f"n={self.n}", f"{self.kind}:{self.name}"]
        if self.tau is not None:
            parts.append(f"tau={self.tau:g}")
        if self.options:
            parts.append(",".join(f"{key}={value!r}" for key, value in self.options))
        parts.append(f"items={self.items}")
        if self.select:
            parts.append(describe_selection(self.select))
        parts.append(f"seed={self.seed}")
        return "/".join(parts)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["options"] = dict(self.options)
        out["select"] = {key: list(values) for key, values in self.select}
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Cell:
        """Inverse of :meth:`as_dict`."""
        options = tuple(sorted(data.get("options", {}).items()))
        select = tuple((key, tuple(v)) for key, v in sorted(data.get("select", {}).items()))
        return cls(**{**data, "options": options, "select": select})


@dataclass(frozen=True)
class Catalog:
    """What this installation offers: suites, methods (those taking tau), rules."""

    suites: tuple[str, ...]
    methods: tuple[str, ...]
    rules: tuple[str, ...] | None  # None: otlp.rules is not installed
    tau_methods: frozenset[str]

    @classmethod
    def current(cls) -> Catalog:
        """The registered suites, methods and rules."""
        methods = tuple(method_names())
        rules = None
        if importlib.util.find_spec("otlp.rules") is not None:
            names = getattr(importlib.import_module("otlp.rules"), "names", None)
            rules = tuple(names()) if callable(names) else None
        takes_tau = frozenset(m for m in methods if accepts(m, "tau"))
        return cls(tuple(suite_names()), methods, rules, takes_tau)


@dataclass(frozen=True)
class GridPlan:
    """The cells to measure, those left out by a size cap, and notes for the report."""

    cells: tuple[Cell, ...]
    capped: tuple[tuple[Cell, int], ...]  # (cell, its draft-column count) over max_columns
    notes: tuple[str, ...]


def accepts(method: str, parameter: str) -> bool:
    """Whether the registered method ``method`` names ``parameter`` in its signature."""
    return parameter in inspect.signature(get_method(method)).parameters


def draft_columns(scheme: str, k: int, n: int) -> int:
    """Draft columns (sets, or tuples for independent drafts) of a (k, n) relaxed OTLP."""
    if scheme == "independent":
        return column_count("tuples", k, n, range(1, n + 1))[0]
    sizes = range(n, n + 1) if scheme == "without_replacement" else range(1, min(n, k) + 1)
    return column_count("sets", k, n, sizes)[0]


def select_items(size: int, count: int) -> np.ndarray:
    """``count`` positions spread evenly over ``range(size)`` (all of them if fewer)."""
    if count >= size:
        return np.arange(size)
    return np.unique(np.linspace(0, size - 1, count).round().astype(np.int64))


def describe_selection(select: Selection) -> str:
    """E.g. "draft=skip2|skip4,temperature=1.0"."""
    return ",".join(f"{key}={'|'.join(map(str, vals))}" for key, vals in select)


def suite_indices(
    metas: Sequence[Mapping[str, Any]], count: int, select: Selection = ()
) -> list[int]:
    """Indices of ``count`` suite items, evenly spread over those whose meta match ``select``."""
    matching = [
        i for i, meta in enumerate(metas) if all(meta.get(key) in vals for key, vals in select)
    ]
    return [matching[i] for i in select_items(len(matching), count)]


def plan_grid(config: BenchConfig, catalog: Catalog, suites: Iterable[str] = ()) -> GridPlan:
    """Expand the sweeps of ``config`` into cells; ``suites`` overrides every sweep's suites."""
    notes: dict[str, None] = {}
    cells: dict[str, Cell] = {}
    capped: dict[str, tuple[Cell, int]] = {}
    override = tuple(suites)
    for sweep in config.sweeps:
        for suite_name in override or sweep.suites:
            suite = resolve_suite(suite_name, catalog.suites)
            if suite not in catalog.suites:
                known = ", ".join(catalog.suites)
                raise ValueError(f"suite: unknown {suite!r}; known: {known}")
            if suite != suite_name:
                notes[f"suite {suite_name!r} resolved to {suite!r}"] = None
            for cell in _sweep_cells(sweep, suite, config, catalog, notes):
                count = draft_columns(cell.scheme, cell.k, cell.n)
                cap = config.settings(cell.name).max_columns if cell.kind != ALPHA else None
                if cap is not None and count > cap:
                    capped.setdefault(cell.id, (cell, count))
                else:
                    cells.setdefault(cell.id, cell)
    check_options(config, [*cells.values(), *(cell for cell, _ in capped.values())])
    return GridPlan(tuple(cells.values()), tuple(capped.values()), tuple(notes))


def _sweep_cells(
    sweep: Sweep, suite: str, config: BenchConfig, catalog: Catalog, notes: dict[str, None]
) -> Iterable[Cell]:
    entries = [(METHOD, name) for name in _known(sweep, "methods", sweep.methods, catalog.methods)]
    entries += [(RULE, name) for name in _known_rules(sweep, catalog, notes)]
    entries += [(DECODE, name) for name in known_decoders(sweep.decoders, notes)]
    for select, scheme, (k, n) in product(
        sweep.select.get(suite, ((),)), sweep.schemes, sweep.points
    ):
        common: dict[str, Any] = {
            "suite": suite,
            "scheme": scheme,
            "k": k,
            "n": n,
            "items": sweep.items,
            "select": select,
            "seed": config.seed,
            "repeats": sweep.repeats,
        }
        yield Cell(kind=ALPHA, name=ALPHA_NAME, tau=None, **common)
        for kind, name in entries:
            settings = config.settings(name)
            for tau in _taus(kind, name, settings, catalog, notes):
                yield Cell(kind=kind, name=name, tau=tau, options=settings.options, **common)


def _known_rules(sweep: Sweep, catalog: Catalog, notes: dict[str, None]) -> list[str]:
    if not sweep.rules:
        return []
    if catalog.rules is None:
        notes["otlp.rules is not installed; rules skipped"] = None
        return []
    if sweep.rules == "all":
        return list(catalog.rules)
    return _known(sweep, "rules", sweep.rules, catalog.rules)


def _known(sweep: Sweep, field: str, names: Sequence[str], known: Sequence[str]) -> list[str]:
    """The sweep's ``names`` for ``field`` (methods or rules), refused naming the sweep, the
    field and every unknown name where one is not among ``known``."""
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ValueError(
            f"[[sweep]] {sweep.name!r} {field}: unknown {', '.join(unknown)}; "
            f"known: {', '.join(known)}"
        )
    return list(names)


def check_options(config: BenchConfig, cells: Iterable[Cell]) -> None:
    """Reject, before anything runs, ``[methods.NAME] options`` that the method or rule does
    not take and ``tau`` values it refuses (global resolution: tau in [1e-10, 1)): each
    distinct (kind, name, options, tau) runs once on a 3-token instance and a ``ValueError``
    or ``TypeError`` becomes a config error naming the method."""
    from otlp.api import solve
    from otlp.global_resolution import check_tau
    from otlp.instance import Instance

    tiny = Instance([0.5, 0.3, 0.2], [0.2, 0.3, 0.5], n=1)
    registered = set(method_names())
    seen = {
        (cell.kind, cell.name, cell.options, cell.tau)
        for cell in cells
        if cell.options
        or (cell.tau is not None and (cell.kind != METHOD or cell.name in registered))
    }
    for kind, name, options, tau in sorted(seen, key=repr):
        what = "tau" if tau is not None else "options"
        try:
            if kind == DECODE:
                check_tau(tau)
            elif kind == METHOD:
                taus: dict[str, Any] = {} if tau is None else {"tau": tau}
                solve(tiny, name, check=False, **dict(options), **taus)
            else:
                rules = importlib.import_module("otlp.rules")
                rules.get(name).acceptance(tiny, **dict(options))
        except (TypeError, ValueError) as exc:
            text = str(exc).removeprefix("tau: ") if what == "tau" else str(exc)
            raise ValueError(f"[methods.{name}] {what}: {text}") from None


def _taus(
    kind: str, name: str, settings: MethodSettings, catalog: Catalog, notes: dict[str, None]
) -> tuple[float | None, ...]:
    if not settings.tau:
        return (None,)
    if (kind == METHOD and name in catalog.tau_methods) or (kind == DECODE and takes_tau(name)):
        return settings.tau
    notes[f"{name!r} takes no tau; its tau grid is ignored"] = None
    return (None,)


UNIT_BUDGET = 20_000  # draft columns solved per work unit: small enough for early progress


@dataclass(frozen=True)
class WorkUnit:
    """One task: ``part`` of ``parts`` contiguous slices of a group's tokens, measured for every
    cell of the group side by side. ``cost`` estimates its work (draft columns solved)."""

    cells: tuple[Cell, ...]
    part: int = 0
    parts: int = 1
    cost: float = 1.0


def group_cells(cells: Iterable[Cell]) -> list[tuple[Cell, ...]]:
    """Cells grouped by (suite, scheme, k, n, items, seed), the costliest groups first."""
    groups: dict[tuple[Any, ...], list[Cell]] = {}
    for cell in cells:
        groups.setdefault(cell.group, []).append(cell)
    return [tuple(g) for g in sorted(groups.values(), key=token_cost, reverse=True)]


def token_cost(group: Sequence[Cell]) -> int:
    """Estimated work of one token of a group: draft columns per solved cell, plus k."""
    first = group[0]
    solved = sum(cell.kind != ALPHA for cell in group)
    return draft_columns(first.scheme, first.k, first.n) * solved + first.k


def work_units(cells: Iterable[Cell], budget: int = UNIT_BUDGET) -> list[WorkUnit]:
    """The groups of ``cells`` split into units of about ``budget`` columns (at least one
    token each), so that the first results and a work-based ETA come within seconds; the
    costliest groups first."""
    units = []
    for group in group_cells(cells):
        per_token = token_cost(group)
        tokens = max(1, min(group[0].items, budget // per_token))
        parts = -(-group[0].items // tokens)
        units += [WorkUnit(group, part, parts, per_token * tokens) for part in range(parts)]
    return units
