"""Checks on the shipped Gemma 3 270M real-model suite (numpy only, fast): V = 262,144, the
SmolLM2 suite's layout, consistent masses and acceptances, registered as ``gemma3``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from otlp.instances.realmodel.load import GEMMA3_PATH, load_gemma3

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "instances" / "data" / "gemma3.npz"


@pytest.fixture(scope="module")
def raw() -> dict[str, np.ndarray]:
    with np.load(DATA, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def test_shipped_file_and_card() -> None:
    assert GEMMA3_PATH.resolve() == DATA.resolve()
    assert DATA.stat().st_size < 8_000_000
    card = (ROOT / "instances" / "data" / "gemma3.md").read_text()
    assert "Gemma Terms of Use" in card and "ai.google.dev/gemma/terms" in card


def test_raw_shapes_vocabulary_and_masses(raw: dict[str, np.ndarray]) -> None:
    n, k = raw["ids"].shape
    assert (n, k) == (12 * 6 * 3 * 2, 1000)
    assert int(raw["vocab_size"]) == 262_144
    assert raw["ids"].min() >= 0 and raw["ids"].max() < 262_144
    assert raw["ids"].max() >= 49_152  # tokens beyond SmolLM2's vocabulary do occur
    assert (np.diff(np.sort(raw["ids"], axis=1), axis=1) > 0).all()
    assert (np.diff(raw["q_top"], axis=1) <= 0).all()
    p_tot = raw["p_top"].astype(np.float64).sum(axis=1) + raw["p_out"]
    q_tot = raw["q_top"].astype(np.float64).sum(axis=1) + raw["q_out"]
    np.testing.assert_allclose(p_tot, 1.0, atol=1e-4)
    np.testing.assert_allclose(q_tot, 1.0, atol=1e-4)
    overlap = np.minimum(raw["p_top"], raw["q_top"]).astype(np.float64).sum(axis=1)
    assert (overlap <= raw["accept1"] + 1e-5).all()
    assert (raw["accept1"] <= overlap + np.minimum(raw["p_out"], raw["q_out"]) + 1e-5).all()
    assert set(raw["draft"].tolist()) == {"skip9", "skip3-9", "exit12"}


def test_loaded_items_and_registered_suite() -> None:
    from otlp.instances.suites import load, suite_names

    items = load_gemma3()
    assert len(items) == 432
    for it in items[:50]:
        assert it["p"].shape == it["q"].shape == (1001,)
        assert abs(it["p"].sum() - 1) < 1e-9 and abs(it["q"].sum() - 1) < 1e-9
        assert it["meta"]["vocab_size"] == 262_144
    assert "gemma3" in suite_names()
    suite = load("gemma3")
    assert len(suite.items) == 432 and suite.items[0].name.startswith("gemma3-")
