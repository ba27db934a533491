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

    surfaces = {"engine", "referee", "decode_cli"}
    assert classes == set(INSTANCE_CLASSES) | {"multistep", "reproducer", "budget"} | surfaces
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
    import otlp.decoder_rows.checks as row_checks

    monkeypatch.setattr(
        row_checks,
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


# ----- issue 39's surfaces: engine layouts, the referee's inputs, the decode command line -----
def _first_of(kind: str, predicate=lambda case: True, seed: int = 56) -> dict:
    """The first generated case of ``kind`` (seed 56) that satisfies ``predicate``."""
    for index in range(10, 20000):
        case = make_case(seed, index)
        if case["kind"] == kind and predicate(case):
            return case
    raise AssertionError(f"no {kind} case")


def test_the_surface_kinds_are_selectable_with_only() -> None:
    """engine:, referee: and cli:decode are components --only accepts and selects; another
    prefix skips their cases."""
    from otlp.fuzz.checks import check_only, run_case

    assert check_only(["engine:sps", "referee:", "cli:decode"])
    for kind, prefix in (("engine", "engine:"), ("referee", "referee:"), ("decode_cli", "cli:")):
        case = _first_of(kind)
        outcomes = run_case(case, frozenset({prefix}))
        assert outcomes and all(o.component.startswith(prefix) for o in outcomes)
        assert all(o.status == "ok" for o in outcomes), outcomes
        assert run_case(case, frozenset({"method:"})) == []
    report = run_campaign([_first_of("engine")], seed=56, only=["engine:"])
    assert report.cases == 1 and report.failed == 0


def _engine_case(**fields: object) -> dict:
    """The first sps engine case of two rows or more, with ``fields`` set (temperature,
    top_k and top_p given as one value for every row)."""
    case = _first_of("engine", lambda c: c["method"] == "sps" and len(c["tokens"]) >= 2)
    rows = len(case["tokens"])
    per_row = ("temperature", "top_k", "top_p")
    return case | {
        k: [v] * rows if k in per_row and v is not None else v for k, v in fields.items()
    }


def test_the_engine_check_catches_a_wrong_target_law(monkeypatch) -> None:
    """A target law that ignores target_top_k (both where it is sampled and in target_laws)
    is caught against the law computed by hand."""
    from otlp.fuzz.engine_layouts import check_engine
    from otlp.verification import engine_layouts

    case = _engine_case(temperature=1.0, top_k=1, top_p=None, dtype="float64")
    assert check_engine(case) == []
    original = engine_layouts.Sampling.laws

    def no_top_k(self, b, logits):
        return original(engine_layouts.Sampling(self.temperature, None, self.top_p), b, logits)

    monkeypatch.setattr(engine_layouts.Sampling, "laws", no_top_k)
    assert any("by hand" in p for p in check_engine(case))


def test_the_engine_check_catches_nan_and_warnings_at_tiny_temperatures(monkeypatch) -> None:
    """softmax(logits / T) without the row's maximum subtracted overflows at T = 1e-39: the
    check turns the warning into a failure (and a NaN law would fail it too)."""
    import numpy as np

    from otlp.fuzz.checks import run_case
    from otlp.verification import engine_layouts

    case = _engine_case(temperature=1e-39, top_k=None, top_p=None, dtype="float32")
    assert [o.status for o in run_case(case)] == ["ok"]

    def naive(self, b, logits):
        law = np.exp(logits / float(self.temperature[b]))
        return law / law.sum(axis=-1, keepdims=True)

    monkeypatch.setattr(engine_layouts.Sampling, "laws", naive)
    (outcome,) = run_case(case)
    assert outcome.status == "failed" and "overflow" in outcome.message, outcome


def test_the_engine_check_catches_a_wrong_sampling_law() -> None:
    """The first-token check compares REPEATS sampled rows with outcome_law: a law at another
    temperature than the one sampled is rejected."""
    import numpy as np

    from otlp.fuzz import engine_layouts as engine

    case = _engine_case(temperature=1.0, top_k=None, top_p=None, dtype="float64", draft_rows="L+1")
    shape = np.shape(case["logits"])
    case["logits"] = np.random.default_rng(0).normal(size=shape).tolist()
    tokens = np.asarray(case["tokens"])
    q = np.asarray(case["q"])
    arguments = {"method": "sps", "temperature": case["temperature"]}
    logits = np.asarray(case["logits"])
    right = engine.target_laws(logits, 1.0)
    wrong = engine.target_laws(logits, 0.25)
    assert engine._first_token_problems(case, 0, tokens, right, q, arguments) == []
    assert engine._first_token_problems(case, 0, tokens, wrong, q, arguments)


def test_the_referee_checks_catch_a_refusal_that_names_nothing(monkeypatch) -> None:
    """referee(seed=-1) left to numpy (the message names no argument) fails the API check;
    an internal error of `otlp referee` (exit 1) fails the command-line check."""
    from otlp.commands import referee as command
    from otlp.fuzz.referee_inputs import check_referee
    from otlp.referee import judge

    api = {"kind": "referee", "index": 0, "class": "referee", "variant": "api_argument"}
    api |= {"argument": "seed", "choice": 0, "seed": 0}  # seed = -1
    cli = {"kind": "referee", "index": 0, "class": "referee", "variant": "cli_flag"}
    cli |= {"flag": "epsilon_nan", "seed": 0}  # refused by referee(), after parsing
    assert check_referee(api) == [] and check_referee(cli) == []
    monkeypatch.setattr(judge, "_count", lambda name, value, minimum: value)
    assert any("without naming 'seed'" in p for p in check_referee(api))

    def crash(args):
        raise KeyError("epsilon")

    monkeypatch.setattr(command, "run", crash)  # register() reads it at every main()
    assert any("exit 1, expected 2" in p for p in check_referee(cli))


def test_the_referee_check_catches_a_broken_sampler_called_lossless(monkeypatch) -> None:
    """A sampler that raises must be an error verdict: a referee that swallowed the error
    (the call's exception counted as a draw of token 0) is caught."""
    from otlp.fuzz.referee_inputs import check_referee
    from otlp.referee import clock

    case = {"kind": "referee", "index": 0, "class": "referee", "variant": "broken"}
    case |= {"sampler": "raise", "protocol_scheme": "iid", "seed": 1}
    assert check_referee(case) == []
    original = clock.limited

    def swallowing(sampler, limit):
        def quiet(*args, **kwargs):
            try:
                return sampler(*args, **kwargs)
            except RuntimeError:
                return 0

        return original(quiet, limit)

    monkeypatch.setattr(clock, "limited", swallowing)
    problems = check_referee(case)
    assert problems and "expected 'error'" in problems[0], problems


def test_the_decode_cli_check_catches_a_model_load_and_an_unnamed_refusal(monkeypatch) -> None:
    """Without the toy-flag check, `--model smollm2 --vocab 10` goes on to load the model
    (the check's loader stands in and fails it); a refusal naming no flag fails too."""
    from otlp.commands import decode
    from otlp.fuzz.decode_cli import check_decode_cli

    case = {"kind": "decode_cli", "index": 0, "class": "decode_cli", "planted": "--vocab"}
    case["argv"] = ["decode", "--vocab", "10", "--model", "smollm2", "--prompt", "hi"]
    assert check_decode_cli(case) == []
    depth = {"kind": "decode_cli", "index": 0, "class": "decode_cli", "planted": "--depth"}
    depth["argv"] = ["decode", "--model", "toy", "--prompt", "1", "--depth", "1000000000"]
    assert check_decode_cli(depth) == []
    monkeypatch.setattr(decode, "_check_toy_flags", lambda args, model: None)
    assert any("loaded a model" in p for p in check_decode_cli(case))
    original = decode.Config.check

    def unnamed(self):
        try:
            return original(self)
        except ValueError:
            raise ValueError("top_k or n: too large") from None

    monkeypatch.setattr(decode.Config, "check", unnamed)
    assert any("does not name --depth" in p for p in check_decode_cli(depth))


def test_running_a_command_in_process_leaves_the_sigterm_handler_alone() -> None:
    """otlp.cli.main installs a SIGTERM handler for a process of its own; a fuzz worker that
    ran `otlp decode` in its warm-up kept it, turned the pool's terminate into a
    KeyboardInterrupt it survived, and the campaign waited for it forever."""
    import signal

    from otlp.fuzz.referee_inputs import run_cli

    before = signal.getsignal(signal.SIGTERM)
    code, _, _, _ = run_cli(["decode", "--model", "toy", "--depth", "0"])
    assert code == 2
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_slow_check_fails_but_numba_compiling_is_not_its_work(monkeypatch) -> None:
    """A check slower than SLOW_S fails; the seconds numba spent compiling a kernel on its
    first use inside the check are not counted (seed 56's engine:block case 22912 took 5.3 s,
    0.1 s on replay)."""
    import time

    from otlp.fuzz import checks

    monkeypatch.setattr(checks, "SLOW_S", 0.05)

    def slow() -> list[str]:
        time.sleep(0.1)
        return []

    outcome = checks._guarded("probe", slow)
    assert outcome.status == "failed" and "took" in outcome.message
    clock = iter([0.0, 1e9])  # the compiler lock held for the whole call, however long
    monkeypatch.setattr(checks, "compile_seconds", lambda: next(clock))
    assert checks._guarded("probe", slow).status == "ok"
