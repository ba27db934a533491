"""The benchmark harness: config, grid planning, per-token measurement, resume, outputs, and
identical records from the local process pool and a Dask LocalCluster."""

from __future__ import annotations

import csv
import json
import logging
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import otlp
from otlp.bench import (
    Catalog,
    Cell,
    ResultStore,
    load_config,
    parse_config,
    plan_grid,
    run_bench,
    without_timings,
)
from otlp.bench.aggregate import summarize
from otlp.bench.cells import ALPHA, METHOD, draft_columns, select_items, suite_indices
from otlp.bench.worker import FAILED, OK, draw_token, measure
from otlp.cli import main
from otlp.instances.suites import load
from otlp.methods import _METHODS, solve_maxflow
from otlp.plan import TransportPlan

TINY = """
[run]
suites = ["synthetic"]
items = 2
workers = 1

[[sweep]]
name = "solvers"
methods = ["highs", "maxflow"]
kn = [[4, 2], [6, 2]]

[[sweep]]
name = "acceptance"
k = [4, 8]
n = [1, 3]

[methods.highs]
max_columns = 12
"""


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("config") / "tiny.toml"
    path.write_text(TINY)
    return path


@pytest.fixture(scope="module")
def local_run(tiny_config: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("local")
    return run_bench(load_config(tiny_config), out, progress=False)


def _catalog(suites=("synthetic",), tau_methods=frozenset()) -> Catalog:
    return Catalog(suites, ("highs", "maxflow", "gr"), None, frozenset(tau_methods))


# ----- configuration and planning ----------------------------------------------------------
def test_config_rejects_bad_input_naming_the_key() -> None:
    with pytest.raises(ValueError, match="sweep"):
        parse_config({"run": {}})
    with pytest.raises(ValueError, match=r"unknown key\(s\) colour"):
        parse_config({"run": {"colour": 1}, "sweep": [{"k": [1], "n": [1]}]})
    with pytest.raises(ValueError, match="kn"):
        parse_config({"sweep": [{"kn": [[10]]}]})
    with pytest.raises(ValueError, match=r"\[\[sweep\]\] 'x' k"):
        parse_config({"sweep": [{"name": "x", "k": [0], "n": [2]}]})
    with pytest.raises(ValueError, match="scheme"):
        parse_config({"run": {"schemes": ["magic"]}, "sweep": [{"k": [4], "n": [2]}]})
    with pytest.raises(ValueError, match="no such file"):
        load_config("/nonexistent/bench.toml")


def test_auto_suite_prefers_the_real_model_suite() -> None:
    config = parse_config({"sweep": [{"k": [4], "n": [2]}]})
    plan = plan_grid(config, _catalog())
    assert {cell.suite for cell in plan.cells} == {"synthetic"}
    plan = plan_grid(config, _catalog(suites=("synthetic", "smollm2")))
    assert {cell.suite for cell in plan.cells} == {"smollm2"}
    assert any("resolved to 'smollm2'" in note for note in plan.notes)
    with pytest.raises(ValueError, match="suite: unknown 'nope'"):
        plan_grid(config, _catalog(), suites=["nope"])


def test_plan_rejects_unknown_methods_caps_sizes_and_expands_tau() -> None:
    bad = parse_config({"sweep": [{"methods": ["highs", "missing"], "kn": [[4, 2]]}]})
    with pytest.raises(ValueError, match="methods: unknown missing; known: highs"):
        plan_grid(bad, _catalog())
    config = parse_config(
        {
            "sweep": [{"methods": ["highs", "gr"], "kn": [[4, 2], [10, 3]]}],
            "methods": {"highs": {"max_columns": 20}, "gr": {"tau": [1e-3, 1e-4]}},
        }
    )
    plan = plan_grid(config, _catalog(tau_methods={"gr"}))
    labels = {(c.k, c.n, c.label) for c in plan.cells}
    assert (4, 2, "highs") in labels and (10, 3, "highs") not in labels
    assert [(c.k, c.n, count) for c, count in plan.capped] == [(10, 3, 175)]
    assert {c.tau for c in plan.cells if c.name == "gr"} == {1e-3, 1e-4}
    assert sum(c.kind == ALPHA for c in plan.cells) == 2
    assert len({c.id for c in plan.cells}) == len(plan.cells)
    # tau is ignored, with a note, for a method that takes none
    plan = plan_grid(config, _catalog())
    assert {c.tau for c in plan.cells if c.name == "gr"} == {None}
    assert any("takes no tau" in note for note in plan.notes)


def test_draft_columns_and_item_selection() -> None:
    assert draft_columns("iid", 10, 2) == 55
    assert draft_columns("without_replacement", 10, 2) == 45
    assert draft_columns("independent", 10, 2) == 100
    assert select_items(40, 4).tolist() == [0, 13, 26, 39]
    assert select_items(3, 10).tolist() == [0, 1, 2]


def test_select_picks_items_by_meta(tmp_path: Path) -> None:
    metas = [{"t": t, "d": d} for t in (1.0, 0.5) for d in ("a", "b", "c")]
    assert suite_indices(metas, 10, (("t", (1.0,)),)) == [0, 1, 2]
    assert suite_indices(metas, 2, (("d", ("a", "c")),)) == [0, 5]
    config = parse_config(
        {
            "run": {"select": {"synthetic": {"temperature": 0.6}, "other": {"x": 1}}},
            "sweep": [
                {"k": [4], "n": [2]},
                {
                    "k": [4],
                    "n": [2],
                    "select": {
                        "synthetic": [{"similarity": [0.5, 0.9], "temperature": 1.0}, {"seed": 1}]
                    },
                },
            ],
        }
    )
    cells = plan_grid(config, _catalog()).cells
    assert [c.select for c in cells] == [
        (("temperature", (0.6,)),),
        (("similarity", (0.5, 0.9)), ("temperature", (1.0,))),
        (("seed", (1,)),),
    ]
    assert len({c.id for c in cells}) == 3
    with pytest.raises(ValueError, match=r"\[run.select\] synthetic t"):
        parse_config({"run": {"select": {"synthetic": {"t": []}}}, "sweep": [{"k": [4], "n": [2]}]})
    nothing = parse_config(
        {"run": {"select": {"synthetic": {"temperature": 7.0}}}, "sweep": [{"k": [4], "n": [2]}]}
    )
    with pytest.raises(ValueError, match="no item of suite 'synthetic'"):
        run_bench(nothing, tmp_path, suites=["synthetic"], progress=False)
    # a selection for another suite does not apply
    other = parse_config(
        {"run": {"select": {"smollm2": {"draft": "skip4"}}}, "sweep": [{"k": [4], "n": [2]}]}
    )
    assert plan_grid(other, _catalog()).cells[0].select == ()


def test_table_heads_rule_plain_or_aligned() -> None:
    from otlp.bench.markdown import table_head

    assert table_head(["a", ""]) == ["| a |  |", "| --- | --- |"]
    assert table_head(["a", "b", "c"], "lrr") == ["| a | b | c |", "|---|---:|---:|"]
    for align in ("lr", "lrx"):
        with pytest.raises(ValueError, match=r"^align: expected l or r for each of 3 columns"):
            table_head(["a", "b", "c"], align)


def test_cell_round_trips_through_its_dict() -> None:
    cell = Cell(
        "synthetic", "iid", 10, 2, METHOD, "gr", 1e-3, 4, 0, 2, (("x", 1),), (("d", ("a",)),)
    )
    assert Cell.from_dict(json.loads(json.dumps(cell.as_dict()))) == cell
    assert cell.label == "gr τ=0.001"


# ----- measurement -------------------------------------------------------------------------
def test_failed_verification_is_a_failure_not_a_number(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(inst: otlp.Instance, form: str = "sets", **options: object) -> TransportPlan:
        plan = solve_maxflow(inst, form)
        cols = plan.explicit.tocoo()
        return TransportPlan.from_relaxed(
            inst, plan.columns, cols.row, cols.col, 0.5 * cols.data, method="broken"
        )

    monkeypatch.setitem(_METHODS, "broken", (broken, "halves the max-flow plan"))
    item = load("synthetic").items[0]
    cell = Cell("synthetic", "iid", 6, 2, METHOD, "broken", None, 1, 0)
    token = draw_token(cell, 0, item)
    record = measure(cell, token)
    assert record["status"] == FAILED and "below alpha*" in record["message"]
    good = measure(replace(cell, name="maxflow"), token)
    assert good["status"] == OK and good["acceptance"] == pytest.approx(token.alpha_star)
    summary = summarize({"id": cell.id, "cell": cell.as_dict(), "tokens": [record]})
    assert summary["failed"] == 1 and summary["acceptance_mean"] is None
    assert summary["verified_rate"] == 0.0


def test_tau_reaches_the_method_and_fallbacks_are_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[float] = []

    def approximate(inst: otlp.Instance, form: str = "sets", *, tau: float = 1e-3) -> TransportPlan:
        seen.append(tau)
        plan = solve_maxflow(inst, form)
        plan.info["fallback"] = ["outer"]  # as if the approximate solve had given up
        return plan

    monkeypatch.setitem(_METHODS, "approx", (approximate, "max-flow posing as a fallback"))
    config = parse_config(
        {"sweep": [{"methods": ["approx"], "kn": [[6, 2]]}], "methods": {"approx": {"tau": [0.01]}}}
    )
    catalog = Catalog(("synthetic",), ("approx",), None, frozenset({"approx"}))
    (cell,) = [c for c in plan_grid(config, catalog).cells if c.kind == METHOD]
    token = draw_token(cell, 0, load("synthetic").items[0])
    record = measure(cell, token)
    assert 0.01 in seen and record["status"] == OK and record["fallback"] is True
    summary = summarize({"id": cell.id, "cell": cell.as_dict(), "tokens": [record, record]})
    assert summary["verified_rate"] == 1.0 and summary["fallback_rate"] == 1.0
    assert summary["success_rate"] == 0.0 and summary["label"] == "approx τ=0.01"


def test_omega_is_drawn_from_the_draft_reproducibly() -> None:
    item = load("synthetic").items[3]
    cell = Cell("synthetic", "iid", 8, 3, ALPHA, "alpha*", None, 1, 7)
    first, again = draw_token(cell, 3, item), draw_token(cell, 3, item)
    assert first.omega == again.omega and len(first.omega) == 3
    inst = otlp.Instance(item.p, item.q, 3, top_k=8)
    assert set(first.omega) <= set(inst.tokens.tolist())
    assert first.alpha_star == pytest.approx(otlp.optimal_acceptance(inst).alpha_star, abs=1e-12)


# ----- whole runs ----------------------------------------------------------------------------
def test_local_run_writes_every_output(local_run) -> None:
    out = local_run.out_dir
    for name in ("results.jsonl", "results.csv", "tokens.csv", "results.json", "report.md"):
        assert (out / name).stat().st_size > 0
    for stem in ("acceptance_vs_k", "time", "best_acceptance"):  # success: only below 100 %
        assert (out / f"synthetic-{stem}.png").read_bytes()[:4] == b"\x89PNG"
    report = (out / "report.md").read_text()
    assert "**Table 1.**" in report and "**Table 2.**" in report
    assert "| (6, 2) | — |" in report  # highs over its max_columns cap at (6, 2)
    rows = {r["id"]: r for r in local_run.summaries}
    methods = [r for r in rows.values() if r["kind"] == METHOD]
    assert len(methods) == 3 and all(r["verified_rate"] == 1.0 for r in methods)
    for r in methods:
        assert r["acceptance_mean"] == pytest.approx(r["alpha_star_mean"], abs=1e-9)
        assert r["time_median_ms"] > 0 and r["time_p90_ms"] >= r["time_median_ms"]
    data = json.loads((out / "results.json").read_text())
    assert data["machine"]["cpu_model"] and data["machine"]["logical_cores"] >= 1
    assert {c["worker"]["blas_threads"]["OMP_NUM_THREADS"] for c in data["cells"]} == {"1"}


def test_resume_skips_finished_cells(local_run, tiny_config: Path) -> None:
    out = local_run.out_dir
    before = ResultStore(out / "results.jsonl").load()
    with (out / "results.jsonl").open("a") as handle:
        handle.write('{"id": "cut short by a killed run')  # no newline: an unfinished line
    again = run_bench(load_config(tiny_config), out, progress=False)
    assert again.cells_run == 0 and again.cells_reused == len(before)
    more = TINY.replace('"maxflow"]', '"maxflow", "maxflow-cs"]')  # old spelling: an alias
    path = tiny_config.with_name("more.toml")
    path.write_text(more)
    extended = run_bench(load_config(path), out, progress=False)
    assert extended.cells_run == 2  # maxflow_cs at (4, 2) and (6, 2) only
    after = ResultStore(out / "results.jsonl").load()
    assert all(after[key] == value for key, value in before.items())
    assert "timings from different runs are not side by side" in (out / "report.md").read_text()


def test_dask_cluster_gives_the_same_records(local_run, tiny_config: Path, tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    logging.getLogger("distributed").setLevel(logging.ERROR)
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        remote = run_bench(
            load_config(tiny_config), tmp_path, scheduler=cluster.scheduler_address, progress=False
        )
    assert remote.cells_run == len(remote.summaries) > 0
    local = ResultStore(local_run.out_dir / "results.jsonl").load()
    dask = ResultStore(tmp_path / "results.jsonl").load()
    assert set(dask) <= set(local)
    for key, record in dask.items():
        assert without_timings(record) == without_timings(local[key])


def test_cli_runs_a_config(tiny_config: Path, tmp_path: Path, capsys) -> None:
    assert (
        main(["bench", "--config", str(tiny_config), "--out", str(tmp_path), "--no-progress"]) == 0
    )
    assert "report:" in capsys.readouterr().err
    assert (tmp_path / "report.md").exists()
    assert main(["bench", "--config", str(tiny_config), "--workers", "0"]) == 2
    alpha = [r for r in summarize_rows(tmp_path) if r["kind"] == ALPHA]
    assert all(0 < float(r["alpha_star_mean"]) <= 1 for r in alpha)
    assert np.isfinite([float(r["time_median_ms"]) for r in alpha]).all()


def summarize_rows(out: Path) -> list[dict[str, str]]:
    with (out / "results.csv").open() as handle:
        return list(csv.DictReader(handle))


def test_main_command_leaves_a_clone_clean(tmp_path: Path) -> None:
    """`otlp bench` (here on a tiny config) writes under otlp-results/, never tracked files."""
    import shutil
    import subprocess
    import sys

    git = shutil.which("git")
    root = Path(__file__).resolve().parents[1]
    if git is None or not (root / ".git").exists():
        pytest.skip("needs git and a git checkout")
    clone = tmp_path / "clone"
    subprocess.run([git, "clone", "-q", str(root), str(clone)], check=True)
    config = tmp_path / "tiny.toml"
    config.write_text(TINY.replace("items = 2", "items = 1"))
    env = {**os.environ, "PYTHONPATH": str(clone)}
    command = [sys.executable, "-m", "otlp", "bench", "--config", str(config), "--no-progress"]
    subprocess.run(command, cwd=clone, env=env, check=True, capture_output=True)
    assert (clone / "otlp-results" / "bench" / "report.md").is_file()
    status = subprocess.run(
        [git, "status", "--porcelain"], cwd=clone, check=True, capture_output=True, text=True
    )
    assert status.stdout == ""


def test_units_split_groups_by_tokens_and_merge_back(tiny_config: Path) -> None:
    from otlp.bench.cells import group_cells, work_units
    from otlp.bench.runner import _merged_cells
    from otlp.bench.worker import run_group, run_unit

    cells = plan_grid(load_config(tiny_config), Catalog.current()).cells
    group = next(g for g in group_cells(cells) if g[0].k == 6)
    units = work_units(group, budget=1)  # one token per unit
    assert len(units) == group[0].items and all(u.parts == group[0].items for u in units)
    merged = list(_merged_cells(iter([run_unit(u) for u in reversed(units)])))
    assert len(merged) == 1
    whole = {r["id"]: r for r in run_group(group)}
    for record in merged[0]:
        assert "part" not in record
        assert without_timings(record) == without_timings(
            {k: v for k, v in whole[record["id"]].items() if k not in ("part", "parts")}
        )
