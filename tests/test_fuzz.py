"""A small seeded fuzz run (``otlp fuzz``) is part of the suite: every component runs, and a
component may fail only while its bug is listed in KNOWN_OPEN."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from otlp import rules
from otlp.cli import main
from otlp.fuzz import campaign_cases, load_replay, make_case, run_campaign, save_failures
from otlp.methods import method_names

SEED, CASES = 0, 48
# Open bugs found by the fuzz campaign: component -> the failure message it may show (a regex);
# each entry must go once its fix lands (every other failure fails this test). None open: the
# tiny-column conditionals of issue 17 (global resolution, cvxpy, SpecHub) are fixed.
KNOWN_OPEN: dict[str, str] = {}


@pytest.fixture(scope="module")
def report():
    return run_campaign(campaign_cases(SEED, CASES), seed=SEED, workers=1)


def test_cases_are_seeded_and_cover_every_class() -> None:
    assert make_case(3, 7) == make_case(3, 7)
    assert make_case(3, 7) != make_case(3, 8)
    classes = {make_case(SEED, i)["class"] for i in range(400)}
    from otlp.fuzz import INSTANCE_CLASSES
    from otlp.fuzz.cases import REPRODUCERS

    assert classes == set(INSTANCE_CLASSES) | {"multistep", "reproducer", "budget"}
    assert [make_case(5, i)["class"] for i in range(len(REPRODUCERS))] == ["reproducer"] * len(
        REPRODUCERS
    )


def test_every_component_runs_and_only_known_bugs_fail(report) -> None:
    names = set(report.tallies)
    assert {f"method:{m}" for m in method_names()} <= names
    assert {f"rule:{r}" for r in rules.names()} <= names
    assert {"scheme:iid", "scheme:independent", "scheme:without_replacement"} <= names
    assert any(name.startswith("multistep:") for name in names)
    for name, tally in report.tallies.items():
        assert tally.ok > 0, f"{name} never passed a case"
    unexpected = [
        f.kind
        for f in report.failures
        if not re.search(KNOWN_OPEN.get(f.component, "^$"), f.message)
    ]
    assert not unexpected, unexpected


def test_failures_replay_from_their_file(report, tmp_path: Path, capsys) -> None:
    path = tmp_path / "failures.json"
    save_failures(report, path)
    cases = load_replay(path)
    assert len(cases) == len({json.dumps(f.case, sort_keys=True) for f in report.failures})
    code = main(["fuzz", "--replay", str(path), "--workers", "1", "--json", "--out", str(tmp_path)])
    result = json.loads(capsys.readouterr().out)
    assert code == (1 if report.failures else 0)
    assert result["cases"] == len(cases)
    assert {f["component"] for f in result["failures"]} == {f.component for f in report.failures}


def test_cli_runs_in_parallel_and_rejects_bad_input(tmp_path: Path, capsys) -> None:
    argv = ["fuzz", "--cases", "16", "--workers", "2", "--only", "scheme:,rule:sps", "--json"]
    assert main([*argv, "--out", str(tmp_path), "--no-progress"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["cases"] == 16 and result["workers"] == 2
    assert set(result["components"]) <= {
        "scheme:iid",
        "scheme:independent",
        "scheme:without_replacement",
        "scheme:greedy",
        "rule:sps",
    }
    assert main(["fuzz", "--cases", "0"]) == 2
    assert "--cases" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert main(["fuzz", "--replay", str(bad)]) == 2
    assert "--replay" in capsys.readouterr().err


def _first_case(name: str, scheme: str, n: int, **extra: object) -> dict:
    """The first generated case (seed 0) of instance class ``name`` set to ``scheme`` and n."""
    for index in range(10, 4000):
        case = make_case(0, index)
        if case["class"] != name or case["scheme"] != scheme or len(case["p"]) <= n:
            continue
        if scheme != "independent" or (np.ndim(case["q"]) == 2 and len(case["q"]) == n):
            # (independent drafts: one q row per draft)
            return case | {"n": n, "top_k": None} | extra
    raise AssertionError(f"no case of class {name}")


def test_decode_checks_every_scheme_with_the_issue_27_classes(monkeypatch) -> None:
    """Issue 27's fuzz classes reach verify_drafts for every scheme (greedy with p = 0 on
    the top drafts, underflowing draft tuples, drafters of split supports, torch
    bfloat16/float16 inputs), pass on the fixed code, and the decode check fails when
    independent pairs are checked against the union vocabulary only (the old rule)."""
    from otlp.fuzz.checks import run_case

    pytest.importorskip("torch")
    torch_bf16 = {"decoder_dtypes": ["torch.bfloat16", "torch.bfloat16"]}
    cases = [
        _first_case("p_off_the_top_drafts", "greedy", 2),
        _first_case("underflowing_tuples", "iid", 2),
        _first_case("underflowing_tuples", "without_replacement", 2),
        _first_case("split_supports", "independent", 2, **torch_bf16),
        _first_case("random", "greedy", 3, decoder_dtypes=["torch.float16", "float64"]),
    ]
    for case in cases:
        outcomes = run_case(case, frozenset({"decode:"}))
        assert outcomes and all(o.status == "ok" for o in outcomes), (case["class"], outcomes)
    split = [
        c for c in (make_case(0, i) for i in range(10, 4000)) if c["class"] == "split_supports"
    ]
    import otlp.global_resolution.fused as fused

    monkeypatch.setattr(
        fused,
        "impossible_draw",
        lambda rows, local: int(np.argmin(local)) if (local < 0).any() else -1,
    )
    caught = []
    for case in split[:40]:
        case = case | {"n": 2, "top_k": None} | torch_bf16
        outcomes = run_case(case, frozenset({"decode:global_resolution"}))
        caught += [o.message for o in outcomes if o.status == "failed"]
    assert any("misordered independent pair" in m for m in caught), caught


def test_every_case_kind_replays_from_a_file(tmp_path: Path) -> None:
    """A saved failure of any kind make_case generates (budget cases included: their
    reproducer files were refused as 'no fuzz cases') loads back for --replay."""
    from otlp.fuzz.cases import KINDS

    found = {}
    for index in range(10, 4000):
        case = make_case(3, index)
        found.setdefault(case["kind"], case)
        if len(found) == len(KINDS):
            break
    assert set(found) == set(KINDS)
    path = tmp_path / "failures.json"
    path.write_text(json.dumps({"seed": 3, "cases": list(found.values())}))
    assert [c["kind"] for c in load_replay(path)] == list(found)


def test_budget_overrun_is_counted_as_work_at_the_calls_cpu_share() -> None:
    """A call preempted past its budget is not charged for the time other processes ran;
    a call that computed past it is charged in full."""
    from otlp.fuzz.checks import overrun_work

    assert overrun_work(10.0, 10.0, 0.1) == pytest.approx(9.9)  # busy past the budget
    assert overrun_work(10.0, 1.0, 0.1) == pytest.approx(0.99)  # ran a tenth of the time
    assert overrun_work(0.05, 0.05, 0.1) == 0.0
    assert overrun_work(10.0, 20.0, 0.1) == pytest.approx(9.9)  # two threads: share 1
