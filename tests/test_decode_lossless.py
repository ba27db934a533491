"""The losslessness test of the decode loop (:mod:`otlp.decoding.lossless`, ``otlp decode
--check-lossless``) on the toy model pair: a lossless method passes, the draft-law negative
control is rejected, and so is a verifier that accepts every draft; the command's rows and its
refused flags."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from otlp.cli import main
from otlp.decoding.loop import Speculation
from otlp.decoding.lossless import LosslessCheck, check_lossless, chi_square, memoized
from otlp.decoding.models import Memoized, PrefixLM
from otlp.multistep.models import model_pair
from tests.cli_errors import usage_error

SAMPLES = 3000
PROMPT = [1, 2]
TOY = ["decode", "--model", "toy", "--no-progress", "--prompt", "1,2"]


@pytest.fixture(scope="module")
def toy() -> tuple[PrefixLM, PrefixLM]:
    """The toy pair of ``otlp decode --model toy`` (V = 8, draft at distance 0.5), memoised."""
    target, draft = model_pair("markov", 8, seed=0, distance=0.5)
    return memoized(PrefixLM(target)), memoized(PrefixLM(draft))


def _check(toy: tuple[PrefixLM, PrefixLM], method: str, paths: int, depth: int) -> LosslessCheck:
    spec = Speculation.paths(method, paths, depth)
    return check_lossless(*toy, PROMPT, spec, samples=SAMPLES, seed=0)


@pytest.mark.parametrize(
    ("method", "paths", "depth"), [("sps", 1, 2), ("gbv", 2, 2), ("rrs", 2, 1)]
)
def test_a_lossless_method_passes_and_the_control_is_rejected(
    toy: tuple[PrefixLM, PrefixLM], method: str, paths: int, depth: int
) -> None:
    check = _check(toy, method, paths, depth)
    assert check.decoded.samples == check.control.samples == SAMPLES
    assert check.decoded.dof == check.decoded.cells - 1 >= 30
    assert check.decoded.pvalue > 1e-4 and not check.decoded.rejected
    assert check.control.pvalue < 1e-6 and check.control.rejected


def test_a_verifier_that_accepts_every_draft_is_rejected(
    toy: tuple[PrefixLM, PrefixLM], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Verifying against the draft's own law (p := q) accepts every drafted token: the pairs
    then follow q(a) q(b | a), and the test must see it."""
    import otlp.verification.tree as tree

    lossless = tree.verify_tree

    def accepts_every_draft(tokens: Any, parents: Any, p: Any, q: Any, **kw: Any) -> Any:
        return lossless(tokens, parents, q, q, **kw)

    monkeypatch.setattr(tree, "verify_tree", accepts_every_draft)
    check = _check(toy, "sps", 1, 2)
    assert check.decoded.pvalue < 1e-6 and check.decoded.rejected


def test_memoized_evaluates_each_context_once(toy: tuple[PrefixLM, PrefixLM]) -> None:
    target, _ = toy
    assert isinstance(target.fn, Memoized)
    before = len(target.fn.laws)
    laws = target.laws([[3, 4], [3, 4], [3, 4, 5]])
    assert np.allclose(laws[0], laws[1]) and np.allclose(laws.sum(axis=1), 1.0)
    assert len(target.fn.laws) - before <= 2
    with pytest.raises(ValueError, match="model:"):
        memoized(object())  # type: ignore[arg-type]


def test_too_few_samples_for_two_cells_is_refused(toy: tuple[PrefixLM, PrefixLM]) -> None:
    with pytest.raises(ValueError, match="samples:"):
        chi_square([(0, 0)] * 3, toy[0], PROMPT)


def test_check_lossless_prints_a_row_per_method_and_the_control(
    capsys: pytest.CaptureFixture,
) -> None:
    argv = [*TOY, "--check-lossless", "2000", "--compare", "sps,gbv", "--paths", "2"]
    assert main([*argv, "--depth", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["prompt_ids"] == PROMPT and data["reject_below"] == 1e-3
    rows = {row["method"]: row for row in data["rows"]}
    assert set(rows) == {"sps", "gbv"}
    for row in rows.values():
        assert row["shape"] == "2x2" and row["decoded"]["samples"] == 2000
        assert row["decoded"]["pvalue"] > 1e-4 and not row["decoded"]["rejected"]
        assert row["control"]["pvalue"] < 1e-6 and row["control"]["rejected"]
    assert main([*argv, "--depth", "2", "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "| method | K×L | samples | cells | χ² | dof | p | control p | s |" in out
    lines = [line for line in out.splitlines() if line.startswith(("| sps ", "| gbv "))]
    assert len(lines) == 2 and all(line.count("rejected") == 1 for line in lines)
    assert "exit status is 0" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rounds", "2"], "--rounds: not with --check-lossless"),
        (["--max-new-tokens", "5"], "--max-new-tokens: not with --check-lossless"),
        (["--prompt", "3"], "--prompt: --check-lossless tests one prompt, got 2"),
        (["--temperature", "0"], "--temperature: --check-lossless needs T > 0"),
        (["--config", "x.toml"], "--config: not with --check-lossless"),
    ],
)
def test_flags_that_do_not_apply_are_refused(
    argv: list[str], message: str, capsys: pytest.CaptureFixture
) -> None:
    assert message in usage_error(
        [*TOY, "--check-lossless", "100", "--method", "sps", *argv], capsys
    )


def test_too_few_samples_is_one_line_naming_the_flag(capsys: pytest.CaptureFixture) -> None:
    assert "--check-lossless:" in usage_error(
        [*TOY, "--check-lossless", "3", "--method", "sps"], capsys
    )
