"""Benchmark configuration: a small TOML file read with :mod:`tomllib`.

Layout (every key optional except at least one ``[[sweep]]`` with a grid)::

    [run]
    suites = ["auto"]        # suite names; "auto" = the real-model suite if registered
    items = 16               # suite items ("tokens") per cell, evenly spaced over the suite
    [run.select]             # per suite: only items whose meta match; a list of tables
    smollm2 = [{draft = "skip4", temperature = 1.0}]   # gives one slice (report section) each
    schemes = ["iid"]        # draft schemes (otlp.SCHEMES)
    seed = 0                 # seeds the drafted omega of every token
    repeats = 1              # timed runs per token; the fastest counts
    workers = 2              # local process-pool size
    time_limits_ms = [10, 100]

    [[sweep]]                # a grid; may override suites/items/select/schemes/repeats
    name = "solve time"
    methods = ["highs", "maxflow"]     # otlp.solve methods
    rules = []                         # otlp.rules names, or "all"
    decoders = []                      # end to end from full-vocabulary arrays (decoder_cells)
    kn = [[10, 2], [100, 2]]           # explicit (k, n) points, or k = [...] and n = [...]

    [methods.highs]          # per method (or rule): size cap, tau grid, solver options
    max_columns = 6000
    [methods.global_resolution]
    tau = [1e-3, 1e-4]

[GR] §7 and Appendix M fix the measured quantities; this file fixes the grid.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from otlp.args import canonical_name
from otlp.instance import SCHEMES

AUTO_SUITE = "auto"
REAL_MODEL_SUITE = "smollm2"
FALLBACK_SUITE = "synthetic"
DEFAULT_TIME_LIMITS_MS = (10.0, 100.0)

_RUN_KEYS = {"suites", "items", "select", "schemes", "seed", "repeats", "workers", "time_limits_ms"}
_SWEEP_KEYS = {
    "name",
    "methods",
    "rules",
    "kn",
    "k",
    "n",
    "suites",
    "items",
    "select",
    "schemes",
    "repeats",
    "decoders",
}
_METHOD_KEYS = {"max_columns", "tau", "options"}


Selection = tuple[tuple[str, tuple[Any, ...]], ...]  # meta key -> accepted values, by key


@dataclass(frozen=True)
class MethodSettings:
    """Per-method settings: a size cap in draft columns, a tau grid, extra solver options."""

    max_columns: int | None = None
    tau: tuple[float, ...] = ()
    options: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class Sweep:
    """One grid: suites x schemes x (k, n) x (methods and rules)."""

    name: str
    suites: tuple[str, ...]
    schemes: tuple[str, ...]
    points: tuple[tuple[int, int], ...]
    methods: tuple[str, ...]
    rules: tuple[str, ...] | str
    items: int
    select: Mapping[str, tuple[Selection, ...]]  # suite -> its selections (one slice each)
    repeats: int
    decoders: tuple[str, ...] = ()  # end-to-end decoder cells (otlp.bench.decoder_cells)


@dataclass(frozen=True)
class BenchConfig:
    """A parsed configuration; ``source`` is the file it came from (for the report)."""

    sweeps: tuple[Sweep, ...]
    method_settings: Mapping[str, MethodSettings] = field(default_factory=dict)
    seed: int = 0
    workers: int = 2
    time_limits_ms: tuple[float, ...] = DEFAULT_TIME_LIMITS_MS
    source: str = ""

    def settings(self, name: str) -> MethodSettings:
        return self.method_settings.get(name, MethodSettings())


def load_config(path: str | Path) -> BenchConfig:
    """Read and validate a TOML benchmark configuration."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"config: no such file {path}")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"config: {path} is not valid TOML ({exc})") from None
    return parse_config(data, source=str(path))


def parse_config(data: Mapping[str, Any], source: str = "") -> BenchConfig:
    """Validate a configuration already read into a mapping (see the module docstring)."""
    _check_keys("config", data, {"run", "sweep", "methods"})
    run = data.get("run", {})
    _check_keys("[run]", run, _RUN_KEYS)
    defaults = {
        "suites": _names("[run] suites", run.get("suites", [AUTO_SUITE])),
        "schemes": _schemes("[run] schemes", run.get("schemes", ["iid"])),
        "items": _positive("[run] items", run.get("items", 16)),
        "select": _select("[run.select]", run.get("select", {})),
        "repeats": _positive("[run] repeats", run.get("repeats", 1)),
    }
    raw_sweeps = data.get("sweep", [])
    if not isinstance(raw_sweeps, list) or not raw_sweeps:
        raise ValueError("config: needs at least one [[sweep]] table")
    sweeps = tuple(_sweep(i, raw, defaults) for i, raw in enumerate(raw_sweeps))
    raw_methods = data.get("methods", {})
    if not isinstance(raw_methods, Mapping):
        raise ValueError("[methods]: expected tables [methods.NAME]")
    settings = {
        canonical_name(name, "[methods]"): _method_settings(name, raw)
        for name, raw in raw_methods.items()
    }
    raw_limits = run.get("time_limits_ms", list(DEFAULT_TIME_LIMITS_MS))
    limits = tuple(
        float(_positive_number("[run] time_limits_ms", v))
        for v in _sequence("[run] time_limits_ms", raw_limits)
    )
    return BenchConfig(
        sweeps=sweeps,
        method_settings=settings,
        seed=_nonnegative("[run] seed", run.get("seed", 0)),
        workers=_positive("[run] workers", run.get("workers", 2)),
        time_limits_ms=limits,
        source=source,
    )


def resolve_suite(name: str, available: Sequence[str]) -> str:
    """``"auto"`` -> the real-model suite when registered, else the synthetic one."""
    if name != AUTO_SUITE:
        return name
    return REAL_MODEL_SUITE if REAL_MODEL_SUITE in available else FALLBACK_SUITE


# ----- validation helpers ------------------------------------------------------------------
def _sweep(index: int, raw: Any, defaults: Mapping[str, Any]) -> Sweep:
    where = f"[[sweep]] #{index + 1}"
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected a table")
    _check_keys(where, raw, _SWEEP_KEYS)
    name = str(raw.get("name", f"sweep {index + 1}"))
    where = f"[[sweep]] {name!r}"
    if "kn" in raw:
        if "k" in raw or "n" in raw:
            raise ValueError(f"{where}: give either kn or k and n, not both")
        points = []
        for point in _sequence(f"{where} kn", raw["kn"]):
            pair = _sequence(f"{where} kn", point)
            if len(pair) != 2:
                raise ValueError(f"{where} kn: expected [k, n] pairs, got {point!r}")
            points.append((_positive(f"{where} kn", pair[0]), _positive(f"{where} kn", pair[1])))
    elif "k" in raw and "n" in raw:
        ks = [_positive(f"{where} k", v) for v in _sequence(f"{where} k", raw["k"])]
        ns = [_positive(f"{where} n", v) for v in _sequence(f"{where} n", raw["n"])]
        points = [(k, n) for k in ks for n in ns]
    else:
        raise ValueError(f"{where}: needs a grid, kn = [[k, n], ...] or k = [...] and n = [...]")
    if not points:
        raise ValueError(f"{where}: empty (k, n) grid")
    rules = raw.get("rules", [])
    rules = rules if rules == "all" else _canonical_names(f"{where} rules", rules, True)
    return Sweep(
        name=name,
        suites=_names(f"{where} suites", raw.get("suites", defaults["suites"])),
        schemes=_schemes(f"{where} schemes", raw.get("schemes", defaults["schemes"])),
        points=tuple(dict.fromkeys(points)),
        methods=_canonical_names(f"{where} methods", raw.get("methods", []), allow_empty=True),
        rules=rules,
        items=_positive(f"{where} items", raw.get("items", defaults["items"])),
        select=_select(f"{where} select", raw["select"]) if "select" in raw else defaults["select"],
        repeats=_positive(f"{where} repeats", raw.get("repeats", defaults["repeats"])),
        decoders=_names(f"{where} decoders", raw.get("decoders", []), allow_empty=True),
    )


def _method_settings(name: str, raw: Any) -> MethodSettings:
    where = f"[methods.{name}]"
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected a table")
    _check_keys(where, raw, _METHOD_KEYS)
    cap = raw.get("max_columns")
    options = raw.get("options", {})
    if not isinstance(options, Mapping):
        raise ValueError(f"{where} options: expected a table")
    return MethodSettings(
        max_columns=None if cap is None else _positive(f"{where} max_columns", cap),
        tau=tuple(
            float(_positive_number(f"{where} tau", v))
            for v in _sequence(f"{where} tau", raw.get("tau", []))
        ),
        options=tuple(sorted(options.items())),
    )


def _select(where: str, value: Any) -> dict[str, tuple[Selection, ...]]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: expected a table: suite = {{meta key = value}} or a list")
    out = {}
    for suite, tables in value.items():
        tables = tables if isinstance(tables, list) else [tables]
        if not tables:
            raise ValueError(f"{where} {suite}: empty list")
        out[suite] = tuple(_selection(f"{where} {suite}", table) for table in tables)
    return out


def _selection(where: str, table: Any) -> Selection:
    if not isinstance(table, Mapping):
        raise ValueError(f"{where}: expected a table of meta key = value (or list of values)")
    out = []
    for key, accepted in sorted(table.items()):
        values = accepted if isinstance(accepted, list) else [accepted]
        if not values or any(isinstance(v, Mapping | list) for v in values):
            raise ValueError(f"{where} {key}: expected a value or a list of values")
        out.append((key, tuple(values)))
    return tuple(out)


def _check_keys(where: str, table: Any, allowed: set[str]) -> None:
    if not isinstance(table, Mapping):
        raise ValueError(f"{where}: expected a table")
    unknown = set(table) - allowed
    if unknown:
        raise ValueError(
            f"{where}: unknown key(s) {', '.join(sorted(unknown))}; "
            f"allowed: {', '.join(sorted(allowed))}"
        )


def _sequence(where: str, value: Any) -> list[Any]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ValueError(f"{where}: expected a list, got {value!r}")
    return list(value)


def _names(where: str, value: Any, allow_empty: bool = False) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    names = _sequence(where, value)
    if not all(isinstance(v, str) and v for v in names):
        raise ValueError(f"{where}: expected a list of names, got {value!r}")
    if not names and not allow_empty:
        raise ValueError(f"{where}: must not be empty")
    return tuple(dict.fromkeys(names))


def _canonical_names(where: str, value: Any, allow_empty: bool = False) -> tuple[str, ...]:
    """Method, rule or scheme names in canonical snake_case ("maxflow-cs" -> "maxflow_cs")."""
    names = _names(where, value, allow_empty)
    return tuple(dict.fromkeys(canonical_name(name, where) for name in names))


def _schemes(where: str, value: Any) -> tuple[str, ...]:
    schemes = _canonical_names(where, value)
    bad = [s for s in schemes if s not in SCHEMES]
    if bad:
        raise ValueError(f"{where}: unknown scheme(s) {', '.join(bad)}; known: {SCHEMES}")
    return schemes


def _positive(where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{where}: expected a positive integer, got {value!r}")
    return value


def _nonnegative(where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where}: expected a non-negative integer, got {value!r}")
    return value


def _positive_number(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{where}: expected a positive number, got {value!r}")
    return value
