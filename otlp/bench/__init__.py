"""The benchmark harness behind ``otlp bench``: suites x methods and rules x (k, n, tau) grids
from a TOML config, measured per token ([GR] §7, Appendix M), resumable, on a local
process pool or a Dask cluster, written as CSV, JSON, a Markdown report and PNG plots."""

from otlp.bench.cells import Catalog, Cell, GridPlan, plan_grid
from otlp.bench.config import BenchConfig, MethodSettings, Sweep, load_config, parse_config
from otlp.bench.runner import BenchInterrupted, BenchOutcome, run_bench
from otlp.bench.store import ResultStore, without_timings

__all__ = [
    "BenchConfig",
    "BenchInterrupted",
    "BenchOutcome",
    "Catalog",
    "Cell",
    "GridPlan",
    "MethodSettings",
    "ResultStore",
    "Sweep",
    "load_config",
    "parse_config",
    "plan_grid",
    "run_bench",
    "without_timings",
]
