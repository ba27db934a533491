"""Checks on the shipped SmolLM2-135M real-model suite (numpy only, fast)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "instances" / "data" / "smollm2.npz"
LOAD_PY = ROOT / "instances" / "realmodel" / "load.py"


def _load_module():
    # Load by file path so that only numpy is needed (no package __init__ imports).
    spec = importlib.util.spec_from_file_location("_realmodel_load", LOAD_PY)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def raw() -> dict[str, np.ndarray]:
    with np.load(DATA, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


@pytest.fixture(scope="module")
def items() -> list[dict]:
    return _load_module().load_smollm2()


def test_default_path_is_shipped_file() -> None:
    mod = _load_module()
    assert mod.DEFAULT_PATH.resolve() == DATA.resolve()
    assert DATA.stat().st_size < 8_000_000


def test_raw_shapes_and_dtypes(raw: dict[str, np.ndarray]) -> None:
    n, k = raw["ids"].shape
    assert k == 1000 and n > 0
    assert raw["ids"].dtype == np.int32
    assert raw["q_top"].shape == raw["p_top"].shape == (n, k)
    assert raw["q_top"].dtype == raw["p_top"].dtype == np.float32
    for key in ("p_out", "q_out", "accept1"):
        assert raw[key].shape == (n,) and raw[key].dtype == np.float64
    for key in ("draft", "temperature", "prompt_kind", "prompt_id", "position"):
        assert raw[key].shape == (n,)
    vocab = int(raw["vocab_size"])
    assert vocab == 49152
    assert raw["ids"].min() >= 0 and raw["ids"].max() < vocab
    assert len(raw["drafts_description"]) == len(set(raw["draft"].tolist()))


def test_ids_unique_and_q_sorted(raw: dict[str, np.ndarray]) -> None:
    ids = np.sort(raw["ids"], axis=1)
    assert (np.diff(ids, axis=1) > 0).all()
    assert (np.diff(raw["q_top"], axis=1) <= 0).all()


def test_raw_masses_consistent(raw: dict[str, np.ndarray]) -> None:
    p_tot = raw["p_top"].astype(np.float64).sum(axis=1) + raw["p_out"]
    q_tot = raw["q_top"].astype(np.float64).sum(axis=1) + raw["q_out"]
    np.testing.assert_allclose(p_tot, 1.0, atol=1e-4)
    np.testing.assert_allclose(q_tot, 1.0, atol=1e-4)
    assert (raw["p_out"] >= 0).all() and (raw["q_out"] >= 0).all()


def test_loaded_vectors(items: list[dict]) -> None:
    assert len(items) > 100
    for it in items:
        p, q = it["p"], it["q"]
        assert p.dtype == q.dtype == np.float64
        assert p.shape == q.shape == (1001,)
        assert (p >= 0).all() and (q >= 0).all()
        assert abs(p.sum() - 1.0) < 1e-9 and abs(q.sum() - 1.0) < 1e-9
        assert q[-1] == 0.0
        assert 0.0 < it["meta"]["accept1"] <= 1.0 + 1e-12


def test_suite_coverage(items: list[dict]) -> None:
    metas = [it["meta"] for it in items]
    drafts = {m["draft"] for m in metas}
    assert len(drafts) >= 4
    assert {1.0, 0.6} <= {m["temperature"] for m in metas}
    assert {"math", "code", "prose", "instructions"} <= {m["prompt_kind"] for m in metas}
    acc = np.array([m["accept1"] for m in metas])
    assert acc.min() < 0.4 < acc.max()
    means = {d: acc[[m["draft"] == d for m in metas]].mean() for d in drafts}
    assert min(means.values()) < 0.4 and max(means.values()) > 0.75


def test_accept1_bounds_truncated_overlap(raw: dict[str, np.ndarray]) -> None:
    # The overlap on the draft's top-1000 ids cannot exceed the full-vocabulary
    # acceptance, and the missing part is at most the out-of-top-k mass.
    overlap = np.minimum(raw["p_top"], raw["q_top"]).astype(np.float64).sum(axis=1)
    assert (overlap <= raw["accept1"] + 1e-5).all()
    assert (raw["accept1"] <= overlap + np.minimum(raw["p_out"], raw["q_out"]) + 1e-5).all()
