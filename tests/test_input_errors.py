"""Issue 17's bad arguments: otlp.sketch, otlp.validate and the CLI answer with a ValueError
naming the argument (the CLI: exit 2 and one line naming the flag), sizes checked before
allocating."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import otlp.limits
import otlp.validate
from otlp import sketch
from otlp.cli import main
from otlp.errors import ProblemTooLarge
from tests.cli_errors import usage_error


@pytest.mark.parametrize(
    ("a", "b", "match"),
    [
        (3.0, [1.0, 2.0], "a: expected a non-empty vector"),
        (None, [1.0, 2.0], "a: expected a vector of real numbers, got None"),
        ([1.0, 2.0], None, "b: expected a vector of real numbers, got None"),
        ([1.0, 2.0], 5, r"b: expected a non-empty vector of length 2, got shape \(\)"),
        ([1.0, 2.0], [1.0, 2.0, 3.0], r"b: expected a non-empty vector of length 2"),
        ([1.0, 2.0], [1.0 + 1j, 2.0], "b: expected real numbers, got dtype complex128"),
        (np.array([1.0 + 2j, 1.0]), [1.0, 2.0], "a: expected real numbers, got dtype complex"),
        ([[1.0, 2.0], [3.0]], [1.0, 2.0], "a: not a vector of real numbers"),
        ([1.0, np.nan], [1.0, 2.0], "a: contains NaN"),
        ([1.0, 2.0], [np.inf, 2.0], "b: contains NaN"),
        ("12", [1.0, 2.0], "a: expected a vector of real numbers"),
        ([], [], "a: expected a non-empty vector"),
    ],
)
@pytest.mark.parametrize("method", sorted(sketch.METHODS))
def test_sketch_vectors_name_themselves(method: str, a: object, b: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        sketch.estimate_inner_products(method, a, b, 2, rng=0)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: sketch.JL(2**40, 4), r"m, dim: a JL sketch with m = 1099511627776"),
        (lambda: sketch.QJL(2**20, 2**20), "m, dim: a QJL sketch"),
        (lambda: sketch.CountSketch(4, 10**12), "m, dim: a CountSketch sketch"),
        (lambda: sketch.ThresholdSampling(4, 10**9, copies=100), "ThresholdSampling"),
        (lambda: sketch.PrioritySampling(10**12, 4), "PrioritySampling"),
    ],
)
def test_sketch_sizes_are_refused_before_allocating(make, match: str) -> None:
    with pytest.raises(ProblemTooLarge, match=match):
        make()


def test_sketch_sizes_follow_the_configured_limit() -> None:
    sketch.JL(100, 100)  # 10^4 entries: fine by default
    with otlp.limits.limited(max_variables=5_000), pytest.raises(ProblemTooLarge):
        sketch.JL(100, 100)
    with otlp.limits.limited(max_variables=5_000):
        sketch.CountSketch(100, 100, copies=20)  # 20 * (100 + 100) entries


def test_threshold_expected_size_of_zero_and_huge_vectors() -> None:
    sampler = sketch.ThresholdSampling(3, 4, rng=0)
    assert sampler.expected_size(np.zeros(4)) == 0.0
    assert sampler.expected_size([1e200, 1e200, 0.0, 0.0]) == pytest.approx(2.0)
    assert sampler.expected_size([1.0, 1.0, 1.0, 1.0]) == pytest.approx(3.0)
    with pytest.raises(ValueError, match="a: expected a non-empty vector of length 4"):
        sampler.expected_size([1.0, 2.0])


@pytest.mark.parametrize(
    ("checks", "match"),
    [
        ([1], "checks: expected check names"),
        (5, "checks: expected a check name or a list"),
        ([], "checks: an empty selection"),
        (["nosuch."], "checks: no check matches 'nosuch.'"),
    ],
)
def test_validate_run_checks_argument(checks: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        otlp.validate.run(checks, count=1)  # type: ignore[arg-type]


def test_validate_run_takes_one_name_as_a_string() -> None:
    name = next(iter(otlp.validate.checks()))
    report = otlp.validate.run(name, count=1)
    assert [r.name for r in report.results] == [name]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"index": -1}, "index: must be at least 0"),
        ({"index": 1.5}, "index: expected an integer"),
        ({"seed": "a"}, "seed: expected an integer"),
        ({"seed": -2}, "seed: must be at least 0"),
        ({"name": 3}, "name: expected a check name"),
        ({"name": "nosuch"}, "name: unknown check 'nosuch'"),
    ],
)
def test_validate_replay_arguments(kwargs: dict, match: str) -> None:
    args = {"name": next(iter(otlp.validate.checks()))} | kwargs
    with pytest.raises(ValueError, match=match):
        otlp.validate.replay(args.pop("name"), **args)


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["fuzz", "--only", "nosuch:", "--cases", "1"], "--only"),
        (["fuzz", "--only", "method:global,rulez", "--cases", "1"], "'rulez'"),
        (["solve", "--scheme", "greedy", "--methods", "global_resolution"], "--methods"),
        (["validate", "--count", "0"], "--count"),
        (["validate", "--seed", "-1"], "--seed"),
        (["validate", "--suite", "nosuch", "--count", "1"], "--suite: unknown 'nosuch'"),
        (["validate", "--checks", "nosuch.", "--count", "1"], "--checks: no check matches"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture
) -> None:
    usage_error(argv, capsys, flag)


def test_bench_tau_outside_global_resolutions_range_is_refused_at_load(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    config = tmp_path / "tau.toml"
    config.write_text(
        '[run]\nsuites = ["dirichlet"]\nitems = 1\n[[sweep]]\nkn = [[3, 2]]\n'
        'methods = ["global_resolution"]\ndecoders = ["global_resolution"]\n'
        "[methods.global_resolution]\ntau = [2.0]\n"
    )
    out = tmp_path / "out"
    argv = ["bench", "--config", str(config), "--out", str(out), "--no-progress"]
    usage_error(argv, capsys, "[methods.global_resolution] tau: must lie in")
    assert not (out / "results.jsonl").exists()  # refused before any cell ran


def test_fuzz_replays_every_failures_file_of_a_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from otlp.fuzz import make_case

    usage_error(["fuzz", "--replay", str(tmp_path)], capsys, "no failures-*.json")
    cases = [make_case(4, 40), make_case(4, 41)]
    for i, case in enumerate(cases):
        (tmp_path / f"failures-seed{i}.json").write_text(json.dumps({"cases": [case]}))
    argv = ["fuzz", "--replay", str(tmp_path), "--only", "scheme:", "--workers", "1", "--json"]
    main([*argv, "--out", str(tmp_path), "--no-progress"])
    assert json.loads(capsys.readouterr().out)["cases"] == 2
