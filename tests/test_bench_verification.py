"""The verification bench config (benchmarks/configs/verification.toml): parsed, measured on a
toy size in this process, rendered as one table per part."""

from __future__ import annotations

from pathlib import Path

import pytest

from otlp.bench.verification import (
    VerificationBench,
    chain_rows,
    load_verification,
    render,
    tree_rows,
    verification_table,
)

CONFIG = Path(__file__).resolve().parents[1] / "benchmarks" / "configs" / "verification.toml"


def test_the_shipped_config_parses():
    bench = load_verification(CONFIG)
    assert bench is not None
    assert bench.tree_vocabs == (49152, 128256, 262144)  # SmolLM2, Llama 3, Gemma 3
    assert bench.drafts_kn == ((100, 2), (1000, 2))
    assert load_verification(CONFIG.parent / "default.toml") is None  # a grid config


def test_unknown_keys_are_refused():
    with pytest.raises(ValueError, match=r"^\[verification\]: unknown key\(s\) vocab"):
        verification_table({"verification": {"vocab": 3}})


def test_toy_run_gives_ratios_to_the_floor():
    bench = VerificationBench(
        tree_cases=("sps", "block", "rrs_without_replacement:without_replacement"),
        chain_vocab=50,
        chain_cases=("sps",),
        chain_libraries=("numpy",),
        repeats=2,
    )
    rows = tree_rows(bench, 64) + chain_rows(bench)
    assert [r["case"] for r in rows] == ["sps", "block", "rrs_without_replacement", "sps"]
    assert all(r["ratio"] > 0 for r in rows)
    assert [r["tree"] for r in rows[:3]] == ["4 x 4", "chain", "4 x 4"]
    report = render(bench, rows, "otlp bench --config x.toml")
    assert "| 64 | `block` | chain |" in report
    assert "| numpy | `sps` |" in report


def test_toy_drafts_run_times_the_object_api_beside_maxflow_cs():
    """The drafts part at the first (k, n) also times Instance + solve + slice per token."""
    from otlp.bench.verification import drafts_rows

    bench = VerificationBench(
        drafts_vocab=300, drafts_kn=((20, 2),), drafts_tokens=1, repeats=1, budgets=(0.05,)
    )
    rows = drafts_rows(bench)
    drafts = [r for r in rows if r["part"] == "drafts"]
    assert [r["scheme"] for r in drafts if "ms_object_api" in r] == [
        "iid",
        "without_replacement",
        "independent",
    ]
    assert all(r.get("ms_object_api", 1.0) > 0 for r in drafts)
    report = render(bench, rows, "otlp bench --config x.toml")
    assert "| (20, 2) | without_replacement |" in report
    assert "object API ms" in report
