"""``otlp decode --emit-ids``: the prompts' token ids and every method's emitted ids in the JSON
(the input of a losslessness check from the command line), refused without ``--json``."""

from __future__ import annotations

import json

import pytest

from otlp.cli import main
from tests.cli_errors import usage_error

TOY = ["decode", "--model", "toy", "--no-progress", "--paths", "2", "--depth", "3"]


def test_emit_ids_gives_every_methods_ids(capsys: pytest.CaptureFixture) -> None:
    argv = [*TOY, "--compare", "gbv,rrs", "--prompt", "1,2", "--prompt", "3"]
    argv += ["--max-new-tokens", "9", "--temperature", "0", "--json", "--emit-ids"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["prompt_ids"] == [[1, 2], [3]]
    ids = data["ids"]
    assert set(ids) == {"ar", "gbv", "rrs"}
    assert all(len(row) == 9 for rows in ids.values() for row in rows)
    assert ids["gbv"] == ids["rrs"] == ids["ar"]  # greedy: every lossless rule emits ar's ids
    assert [" ".join(map(str, row)) for row in ids["ar"]] == data["texts"]["ar"]


def test_emit_ids_are_the_sampled_ids_at_temperature_one(capsys: pytest.CaptureFixture) -> None:
    argv = [*TOY, "--method", "gbv", "--prompt", "1", "--max-new-tokens", "6", "--json"]
    assert main(argv) == 0
    assert "ids" not in json.loads(capsys.readouterr().out)  # only when asked for
    assert main([*argv, "--emit-ids"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [" ".join(map(str, row)) for row in data["ids"]["gbv"]] == data["texts"]["gbv"]


def test_emit_ids_without_json_is_refused(capsys: pytest.CaptureFixture) -> None:
    assert "--emit-ids: only with --json" in usage_error(
        [*TOY, "--method", "gbv", "--emit-ids"], capsys
    )
