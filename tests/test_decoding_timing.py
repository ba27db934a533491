"""Interleaved timing of ``otlp decode`` on the toy pair: the order of the runs, equal lengths,
the same seeds for ar and the methods, the load average per run, per-round speed-ups, the
progress lines on a non-terminal stderr, the 80-column table and the prompt sets."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
from pathlib import Path

import pytest
from rich.console import Console

from otlp.cli import main
from otlp.commands.decode_report import RunLog, table
from otlp.decoding import grid as compare
from otlp.decoding.grid import Config, Run, read_grid, run_configs, schedule
from otlp.decoding.models import PrefixLM
from otlp.decoding.prompts import FREE_PROMPTS, GROUNDED_PROMPTS
from otlp.multistep.models import model_pair

AR = Config("ar")


def toy_factory(temperature: float, draft: str) -> tuple[PrefixLM, PrefixLM]:
    target, drafting = model_pair("markov", 5, seed=1, distance=0.5)
    return PrefixLM(target, temperature=temperature), PrefixLM(drafting, temperature=temperature)


def test_schedule_pairs_every_method_with_its_own_ar_run_in_alternating_order():
    sps, gbv = Config("sps", 1, 2), Config("gbv", 2, 2)
    hot = Config("sps", 1, 2, temperature=0.5)
    cold_ar = Config("ar", temperature=0.5)
    assert schedule([sps, gbv, AR, hot, sps], 2) == [
        (0, AR, sps),
        (0, sps, None),
        (0, AR, gbv),
        (0, gbv, None),
        (0, cold_ar, hot),
        (0, hot, None),
        (1, sps, None),
        (1, AR, sps),
        (1, gbv, None),
        (1, AR, gbv),
        (1, hot, None),
        (1, cold_ar, hot),
    ]


def test_runs_decode_equal_lengths_with_the_same_seeds(monkeypatch: pytest.MonkeyPatch):
    loads = itertools.count(1.0)
    monkeypatch.setattr(compare.os, "getloadavg", lambda: (next(loads), 0.0, 0.0))
    runs: list[Run] = []
    configs = [Config("sps", 1, 3), Config("gbv", 2, 2)]
    rows = run_configs(
        toy_factory, [[0], [1, 2], []], configs, max_new_tokens=9, rounds=3, done=runs.append
    )
    assert [(run.round, run.config, run.pair) for run in runs] == schedule(configs, 3)
    for run in runs:
        assert [len(t) for t in run.result.tokens] == [9, 9, 9]  # equal lengths, every run
    by_method = {row.method: row for row in rows}
    assert set(by_method) == {"ar", "sps", "gbv"}
    for row in rows:
        own = [run for run in runs if run.config.method == row.method]
        assert row.round_loads == tuple(run.load for run in own)  # the load beside each run
        assert row.speedup_low <= row.speedup <= row.speedup_high
        if row.method == "ar":
            assert row.rounds == 6 and row.tokens == 6 * 3 * 9 and row.speedup == 1.0
            continue
        # each round's speed-up: the adjacent ar run's wall time over the method's
        ar = {
            run.round: run.result.wall_s
            for run in runs
            if run.config.method == "ar" and run.pair is not None and run.pair.method == row.method
        }
        assert row.rounds == 3 and row.tokens == 3 * 3 * 9
        assert row.round_speedups == tuple(ar[run.round] / run.result.wall_s for run in own)
    assert [run.load for run in runs] == [float(i) for i in range(1, 13)]
    # ar and a method of one round see the same seeds: at T = 0 ... and at T = 1 the same
    # round's ar run is reproduced whatever runs beside it.
    alone: list[Run] = []
    run_configs(
        toy_factory,
        [[0], [1, 2], []],
        [Config("sps", 1, 3)],
        max_new_tokens=9,
        rounds=3,
        done=alone.append,
    )
    ar_tokens = {run.round: run.result.tokens for run in runs if run.config.method == "ar"}
    assert {run.round: run.result.tokens for run in alone if run.config.method == "ar"} == (
        ar_tokens
    )
    assert ar_tokens[0] != ar_tokens[1]  # rounds differ: more text behind block efficiency


def test_greedy_methods_reproduce_ar_in_every_round():
    runs: list[Run] = []
    configs = [Config("sps", 1, 3, temperature=0.0), Config("gbv", 2, 2, temperature=0.0)]
    run_configs(toy_factory, [[0], [3]], configs, max_new_tokens=8, rounds=2, done=runs.append)
    texts = {(run.round, run.config.method): run.result.tokens for run in runs}
    for r in range(2):
        assert texts[(r, "sps")] == texts[(r, "gbv")] == texts[(r, "ar")]


def test_greedy_block_efficiency_error_is_over_prompts_not_rounds():
    """At T = 0 the rounds replay one text: more rounds leave the standard error unchanged
    (issue 36: it shrank with --rounds); at T = 1 they add steps and the error shrinks."""
    for temperature, same in ((0.0, True), (1.0, False)):
        configs = [Config("sps", 1, 3, temperature=temperature)]
        rows = {
            rounds: run_configs(toy_factory, [[0], [3]], configs, max_new_tokens=12, rounds=rounds)
            for rounds in (1, 3)
        }
        one, three = (next(r for r in rows[k] if r.method == "sps") for k in (1, 3))
        assert (one.block_efficiency_se == three.block_efficiency_se) is same
        if same:
            assert one.block_efficiency == three.block_efficiency
        else:
            assert three.block_efficiency_se < one.block_efficiency_se


def test_run_log_prints_a_line_per_run_with_an_estimate(capsys: pytest.CaptureFixture):
    sps = Config("sps", 1, 2)
    order = schedule([sps], 2)  # ar, sps, sps, ar
    ticks = iter([0.0, 10.0, 40.0, 70.0, 80.0])
    log = RunLog(order, enabled=True, clock=lambda: next(ticks))
    for r, config, pair in order:
        log(Run(config, r, 1.5, None, pair))  # type: ignore[arg-type]
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("decode: run 1/4 ar, round 1/2: 10.0 s (load 1.5)")
    # after ar (10 s): sps unknown -> the mean of every run so far (10), then sps, ar: 30 s
    assert lines[0].endswith("elapsed 0:00:10, about 0:00:30 left")
    # after ar, sps (10, 30): sps 30 + ar 10
    assert lines[1].endswith("elapsed 0:00:40, about 0:00:40 left")
    assert lines[3].endswith("elapsed 0:01:20, about 0:00:00 left")


def test_progress_lines_on_a_non_terminal_stderr(capsys: pytest.CaptureFixture):
    argv = ["decode", "--model", "toy", "--compare", "sps,gbv", "--paths", "1", "--depth", "2"]
    assert main([*argv, "--max-new-tokens", "5", "--rounds", "2", "--prompt", "1"]) == 0
    err = capsys.readouterr().err.splitlines()
    lines = [line for line in err if line.startswith("decode: run ")]
    assert len(lines) == 8 and all("elapsed" in line and "left" in line for line in lines)
    assert main([*argv, "--max-new-tokens", "5", "--prompt", "1", "--no-progress"]) == 0
    assert "decode: run" not in capsys.readouterr().err


def render(rows: list[compare.Row], width: int = 80) -> str:
    console = Console(width=width, file=io.StringIO(), record=True)
    console.print(table(rows))
    return console.export_text()


def test_table_fits_80_columns_without_cutting_anything():
    configs = [
        Config("rrs_without_replacement", 4, 4, draft="lookup3w4"),
        Config("global_resolution", 4, 4, temperature=0.6, draft="skip4"),
        Config("spechub", 2, 1, draft="skip:3,17,25", branching=(2, 2, 2)),
    ]
    rows = run_configs(lambda t, d: toy_factory(t, d), [[0]], configs, max_new_tokens=30, rounds=3)
    text = render(rows)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in text
    head = next(line for line in lines if "method" in line).split()
    assert head == ["method", "draft", "T", "K×L", "BE", "×ar", "min–max", "load", "d/t/v", "%"]
    for row in rows:  # the figures are never split across lines
        assert f"{row.block_efficiency:.2f}±" in text and f"{row.speedup:.2f}" in text
        if row.method != "ar":
            assert f"{row.speedup_low:.2f}–{row.speedup_high:.2f}" in text
    assert "rrs_without" in text and "skip:3,17" in text  # long names wrap, not cut
    assert "BE: block efficiency" in text  # the legend


def test_shared_temperature_and_draft_move_to_the_title():
    rows = run_configs(toy_factory, [[0]], [Config("sps", 1, 2, draft="lookup3")], max_new_tokens=4)
    text = render(rows)
    assert "T = 1" in text.splitlines()[0] + text.splitlines()[1]
    assert " draft " not in text.splitlines()[3]


def test_method_help_lists_the_methods_and_says_ar_is_added(capsys: pytest.CaptureFixture):
    """Issue 36: ``--help`` names every method ``--method`` takes."""
    from otlp.verification.tree import METHODS

    with contextlib.suppress(SystemExit):
        main(["decode", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"verification method: {', '.join(METHODS)} (ar is added" in help_text


def test_printed_texts_are_labelled_with_their_method(capsys: pytest.CaptureFixture):
    argv = ["decode", "--model", "toy", "--method", "rrs", "--paths", "2", "--depth", "2"]
    assert main([*argv, "--prompt", "1,2", "--max-new-tokens", "6", "--no-progress"]) == 0
    assert "rrs, prompt 1: 1,2" in capsys.readouterr().out


def test_grounded_prompt_set_is_selectable(capsys: pytest.CaptureFixture, tmp_path: Path):
    argv = ["decode", "--model", "toy", "--method", "sps", "--paths", "1", "--depth", "2"]
    for name, count in (("grounded", len(GROUNDED_PROMPTS)), ("both", 12)):
        assert (
            main([*argv, "--prompts", name, "--max-new-tokens", "3", "--json", "--no-progress"])
            == 0
        )
        data = json.loads(capsys.readouterr().out)
        assert len(data["texts"]["sps"]) == data["rows"][0]["prompts"] == count
    config = tmp_path / "grounded.toml"
    config.write_text('[decode]\nmodel = "toy"\nmethods = ["sps"]\nprompts = "grounded"\n')
    assert read_grid(config).prompts == GROUNDED_PROMPTS
    config.write_text('[decode]\nmodel = "toy"\nmethods = ["sps"]\nprompts = "nope"\n')
    with pytest.raises(ValueError, match="prompts"):
        read_grid(config)
    assert len(GROUNDED_PROMPTS) == 8 and not set(GROUNDED_PROMPTS) & set(FREE_PROMPTS)


def test_cost_model_block_efficiency_needed_for_a_speedup():
    rows = run_configs(toy_factory, [[0]], [Config("sps", 1, 3)], max_new_tokens=12)
    row = next(r for r in rows if r.method == "sps")
    assert row.needed_block_efficiency(row.model_speedup) == pytest.approx(row.block_efficiency)
    assert row.needed_block_efficiency(2.6) == pytest.approx(2 * row.needed_block_efficiency(1.3))
    assert f"{row.needed_block_efficiency():.2f} (4)" in compare.cost_markdown(rows)


def test_every_config_and_its_ar_baseline_take_one_untimed_step_before_the_timed_runs(
    monkeypatch: pytest.MonkeyPatch,
):
    calls: list[tuple[str, int]] = []
    real = compare.decode

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append((args[3].method, kwargs["max_new_tokens"]))
        return real(*args, **kwargs)

    monkeypatch.setattr(compare, "decode", counting)
    configs = [Config("sps", 1, 2), Config("rrs", 2, 2)]
    runs: list[Run] = []
    run_configs(toy_factory, [[0]], configs, max_new_tokens=5, done=runs.append)
    warm = [("ar", 1), ("sps", 1), ("ar", 1), ("rrs", 1)]
    assert calls[:4] == warm  # before the first timed run, one step each
    assert [max_new for _, max_new in calls[4:]] == [5] * len(runs)
    calls.clear()
    run_configs(toy_factory, [[0]], configs, max_new_tokens=5, warm_up=False)
    assert all(max_new == 5 for _, max_new in calls)


def test_global_resolution_drafts_from_the_top_100_unless_a_top_k_is_named():
    assert Config("global_resolution", 2, 2).speculation().top_k == 100
    assert Config("global_resolution", 2, 2, top_k=7).speculation().top_k == 7
    assert Config("rrs", 2, 2).speculation().top_k is None
    rows = run_configs(toy_factory, [[0]], [Config("global_resolution", 2, 2)], max_new_tokens=3)
    gr = next(r for r in rows if r.method == "global_resolution")
    assert gr.top_k == 100 and compare.method_text(gr) == "global_resolution top-100"
    assert "| global_resolution top-100 |" in compare.markdown(rows)


def test_a_top_k_beyond_the_vocabulary_keeps_all_of_it():
    from otlp.decoding import Speculation, decode

    target, draft = toy_factory(1.0, "")
    runs = [
        decode(target, draft, [[0]], Speculation.paths("rrs", 2, 2, top_k=k), max_new_tokens=9)
        for k in (None, 5, 100)
    ]
    assert runs[0].tokens == runs[1].tokens == runs[2].tokens


@pytest.mark.parametrize("quiet", [False, True])
def test_a_model_load_says_so_on_stderr_unless_progress_is_off(monkeypatch, capsys, quiet):
    """Issue 36: a real model loads for seconds to a minute with nothing printed; now one line
    before (which models, which precision) and one after (how long), on stderr, unless
    --no-progress."""
    import argparse

    from otlp.commands import decode as command

    loaded = object()
    monkeypatch.setattr(command, "load_model_pair", lambda *args, **kwargs: loaded)
    args = argparse.Namespace(threads=1, no_progress=quiet)
    selection = command.Selection("smollm2", None, ("skip4",), "bfloat16")
    assert command._load_pair(args, selection) is loaded
    out, err = capsys.readouterr()
    assert out == ""
    if quiet:
        assert err == ""
    else:
        first, second = err.splitlines()
        assert first == "loading smollm2 (bfloat16) ..." and second.startswith("loaded in ")
