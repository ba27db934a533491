"""``otlp decode`` on the toy model pair: text and statistics, --compare, the --config grid,
and one-line errors (exit 2) for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from otlp.cli import main
from otlp.commands import decode as decode_command
from tests.cli_errors import usage_error


def test_decode_prints_tokens_and_statistics(capsys: pytest.CaptureFixture) -> None:
    argv = ["decode", "--model", "toy", "--method", "rrs", "--paths", "2", "--depth", "2"]
    assert main([*argv, "--prompt", "1,2", "--max-new-tokens", "12", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "prompt 1" in out and "rrs" in out and "speculative decoding" in out


def test_compare_runs_methods_on_the_same_prompts(capsys: pytest.CaptureFixture) -> None:
    argv = ["decode", "--model", "toy", "--compare", "sps,gbv", "--paths", "1", "--depth", "3"]
    assert main([*argv, "--max-new-tokens", "30", "--json", "--no-progress"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {row["method"]: row for row in data["rows"]}
    assert set(rows) == {"ar", "sps", "gbv"}
    assert rows["ar"]["block_efficiency"] == 1.0
    assert rows["sps"]["block_efficiency"] > 1.0
    assert rows["sps"]["tokens"] == rows["gbv"]["tokens"] == 4 * 30


def test_config_grid_writes_table_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    config = tmp_path / "toy.toml"
    config.write_text(
        '[decode]\nmodel = "toy"\nmethods = ["block", "gbv", "rrs"]\npaths = [1, 2]\n'
        'depths = [1, 2]\ntemperatures = [1.0]\nmax_new_tokens = 8\nprompts = ["0", "1"]\n'
    )
    out = tmp_path / "out"
    assert main(["decode", "--config", str(config), "--out", str(out), "--no-progress"]) == 0
    table = (out / "decode.md").read_text()
    rows = json.loads((out / "decode.json").read_text())
    shapes = {(r["method"], r["shape"]) for r in rows}
    assert ("gbv", "2x2") in shapes and ("block", "1x2") in shapes and ("ar", "-") in shapes
    assert ("gbv", "1x1") not in shapes  # GBV with one path is block verification
    assert "break-even draft cost" in table
    assert sorted(p.name for p in out.glob("*.png")) == [
        "block_efficiency-T1-vs-K.png",
        "block_efficiency-T1-vs-L.png",
    ]
    capsys.readouterr()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--prompt", "a,b"], "--prompt"),
        (["--prompt", "99"], "--prompt"),
        (["--method", "spechub", "--paths", "4"], "spechub"),
        (["--method", "block", "--paths", "2"], "block"),
        (["--out", "x"], "--out"),
        (["--config", "missing.toml"], "--config"),
        (["--draft", "skip4"], "--draft: the toy model pair has its own draft"),
        (["--precision", "int8"], "--precision"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture
) -> None:
    assert message in usage_error(["decode", "--model", "toy", "--no-progress", *argv], capsys)


@pytest.fixture
def no_model_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading any model or starting any decode fails the test: what is checked must be
    refused before."""

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("a model was loaded or a decode started before the check")

    from otlp.decoding.models import local, smollm2

    monkeypatch.setattr(smollm2, "load", forbidden)
    monkeypatch.setattr(local, "_load", forbidden)
    monkeypatch.setattr(decode_command, "run_configs", forbidden)


@pytest.mark.parametrize("model", ["toy", "smollm2"])
@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--draft", "nosuch"], "--draft"),
        (["--draft", "lookup0"], "--draft"),
        (["--top-k", "0"], "--top-k"),
        (["--seed", "-1"], "--seed"),
        (["--paths", "0"], "--paths"),
        (["--depth", "x"], "--depth"),
        (["--max-new-tokens", "0"], "--max-new-tokens"),
        (["--temperature", "-1"], "--temperature"),
        (["--method", "nope"], "--method"),
        (["--compare", "sps,nope"], "--compare"),
        (["--scheme", "nosuch"], "--scheme"),
        (["--threads", "0"], "--threads"),
        (["--precision", "fp8"], "--precision"),
        (["--model", "no/such/folder"], "--model"),
        (["--draft-model", "no/such/folder"], "--draft-model"),
    ],
)
def test_every_flag_is_checked_at_parse_time(
    model: str, argv: list[str], flag: str, no_model_loads: None, capsys: pytest.CaptureFixture
) -> None:
    """A bad value is a usage error naming its flag (exit 2), whatever the model, before any
    model loads."""
    usage_error(["decode", "--no-progress", "--model", model, *argv], capsys, flag)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--draft", "skip:3,40"], "--draft: 'skip:3,40' names a layer beyond 29"),
        (["--draft", "exit31"], "--draft: 'exit31' needs 1 <= N <= 30"),
        (["--draft", "skip3"], "--draft: unknown 'skip3'; this model's named sets are skip1"),
        (["--draft", "exit2", "--draft-model", "smollm2"], "--draft: not with a draft model"),
        (["--method", "block", "--paths", "2"], "--method: block does not verify a 2x4 tree"),
        (["--method", "rrs", "--scheme", "spechub"], "--scheme: method 'rrs' verifies children"),
        (  # fuzz seed 57, case 34098: the refusal named drafting's "n", not the flag
            ["--method", "sps", "--paths", "3", "--scheme", "spechub"],
            "--paths: scheme 'spechub' drafts at most two children a node",
        ),
        (
            ["--method", "sps", "--branching", "2,3", "--scheme", "spechub"],
            "--branching: scheme 'spechub' drafts at most two children a node",
        ),
    ],
)
def test_smollm2_flags_are_checked_before_it_loads(
    argv: list[str], message: str, no_model_loads: None, capsys: pytest.CaptureFixture
) -> None:
    usage_error(["decode", "--no-progress", *argv], capsys, message)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('methods = ["sps", "nosuch"]', "--config: methods: unknown nosuch"),
        ('methods = ["sps"]\ndrafts = ["nosuch"]', "--config: drafts: expected exitN"),
        ('methods = ["sps"]\ndrafts = ["skip:99"]', "--config: drafts: 'skip:99' names a layer"),
        ('methods = ["sps"]\npaths = [1, 0]', "--config: paths: must be at least 1, got 0"),
        ('methods = ["sps"]\ndepths = []', "--config: depths: must be a non-empty list"),
        ('methods = ["sps"]\ntemperatures = [-1.0]', "--config: temperatures: must be at least 0"),
        ('methods = ["sps"]\nmax_new_tokens = 0', "--config: max_new_tokens: must be at least 1"),
        ('methods = ["sps"]\nseed = -2', "--config: seed: must be at least 0"),
        ('methods = ["sps"]\ntop_k = "5"', "--config: top_k: expected an integer"),
        ('methods = ["sps"]\nprecision = "fp8"', "--config: precision: expected one of"),
        ('methods = ["sps"]\nscheme = "nosuch"', "--config: scheme: expected one of"),
        ('methods = ["sps"]\nmodel = "no/such/model"', "--config: model: no such file"),
        ('methods = ["sps"]\ndraft_model = "no/such"', "--config: draft_model: no such file"),
        ('methods = ["sps"]\ndrafts = ["exit2"]\ndraft_model = "smollm2"', "--config: drafts"),
        ('methods = ["spechub"]\npaths = [4]', "--config: no method of methods verifies"),
        ('methods = ["rrs"]\nscheme = "spechub"', "--config: scheme: method 'rrs' verifies"),
    ],
)
def test_config_entries_are_checked_before_the_first_run(
    entry: str, message: str, tmp_path: Path, no_model_loads: None, capsys: pytest.CaptureFixture
) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(f"[decode]\n{entry}\n")
    err = usage_error(["decode", "--no-progress", "--config", str(config)], capsys)
    assert message in err, err


def test_method_ar_alone_is_refused_naming_the_flag(capsys: pytest.CaptureFixture) -> None:
    """``--method ar`` has nothing to be timed against (ar runs beside every method): one line,
    exit 2, instead of an internal IndexError; ar stays valid in --compare."""
    alone = ["decode", "--model", "toy", "--method", "ar", "--max-new-tokens", "3"]
    assert usage_error(alone, capsys).startswith("otlp decode: error: --method: ar runs beside")
    argv = ["decode", "--model", "toy", "--compare", "ar,sps", "--paths", "1"]
    assert main([*argv, "--max-new-tokens", "3", "--no-progress", "--json"]) == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--vocab", "100000"], "--vocab: markov model pair's law tables would need"),
        (["--depth", "1000000000"], "--depth: draft tree nodes would need 4,000,000,000"),
        (["--paths", "1000000000"], "--paths: draft tree nodes would need 4,000,000,000"),
        (["--branching", "100000,100000"], "--branching: draft tree nodes would need"),
    ],
)
def test_sizes_over_the_limits_are_refused_naming_the_flag(
    argv: list[str], message: str, no_model_loads: None, capsys: pytest.CaptureFixture
) -> None:
    """A toy vocabulary or a draft tree too large for otlp.limits is refused before anything
    is allocated: exit 2, one line naming the flag (not an internal MemoryError, not the
    library's "top_k or n")."""
    err = usage_error(["decode", "--no-progress", "--model", "toy", *argv], capsys)
    assert message in err and "top_k or n" not in err


@pytest.mark.parametrize(
    ("argv", "flag"), [(["--vocab", "16"], "--vocab"), (["--distance", "0.2"], "--distance")]
)
def test_toy_flags_with_a_real_model_are_refused(
    argv: list[str], flag: str, no_model_loads: None, capsys: pytest.CaptureFixture
) -> None:
    """--vocab and --distance shape the toy pair only: with smollm2 they are refused before
    it loads (exit 2, one line naming the flag), not silently ignored."""
    err = usage_error(["decode", "--no-progress", "--model", "smollm2", *argv], capsys)
    assert f"{flag}: only for --model toy" in err


@pytest.mark.parametrize(
    "flags",
    [
        ["--method", "rrs_without_replacement", "--branching", "2,2", "--temperature", "0"],
        [
            "--method",
            "traversal_verification",
            "--scheme",
            "without_replacement",
            "--branching",
            "3,2",
            "--top-k",
            "2",
        ],
    ],
)
def test_without_replacement_children_beyond_the_drafts_support_are_absent(flags, capsys):
    """Fuzz seed 56, case 2083: greedy drafting (temperature 0) or a top-k below the branching
    leaves fewer tokens than children to draw without replacement; the run failed mid-decode
    ("n: drawing 2 distinct drafts needs 2 tokens"). The children beyond the support are now
    absent, and greedy decoding emits ar's tokens."""
    argv = ["decode", "--model", "toy", "--prompt", "1,2", "--max-new-tokens", "5", "--json"]
    assert main([*argv, "--no-progress", *flags]) == 0, capsys.readouterr().err
    texts = json.loads(capsys.readouterr().out)["texts"]
    if "0" in flags:  # greedy: every lossless method emits the target's argmax path
        assert texts[flags[1]] == texts["ar"]
