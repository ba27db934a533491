"""Load the shipped real-model instance suites, SmolLM2-135M and Gemma 3 270M (numpy only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_PATH = Path(__file__).parent.parent / "data" / "smollm2.npz"
GEMMA3_PATH = Path(__file__).parent.parent / "data" / "gemma3.npz"

_META_KEYS = (
    "draft",
    "temperature",
    "draft_temperature",
    "prompt_kind",
    "prompt_id",
    "position",
    "next_token",
    "accept1",
    "p_out",
    "q_out",
)


def _py(x: Any) -> Any:
    """numpy scalar -> plain Python scalar."""
    return x.item() if isinstance(x, np.generic) else x


def load_smollm2(path: str | Path | None = None) -> list[dict[str, Any]]:
    """Instances of the SmolLM2 suite as ``{"p", "q", "meta"}`` dicts.

    ``p`` and ``q`` are float64 vectors of length ``top_k + 1`` (1001): entries
    ``0..top_k-1`` are the target and draft probabilities at the draft's
    ``top_k`` most likely tokens (by decreasing ``q``); the last entry
    aggregates the rest of the vocabulary (``p_out`` for ``p``, ``0.0`` for
    ``q``, whose top-k values are renormalised).  Both sum to 1 in float64.

    ``meta`` holds the row's metadata, including ``accept1``: the exact
    full-vocabulary single-draft acceptance ``sum_x min(p(x), q(x))``, and the
    out-of-top-k masses ``p_out`` and ``q_out`` (both before renormalisation).
    """
    path = DEFAULT_PATH if path is None else Path(path)
    with np.load(path, allow_pickle=False) as z:
        p_top = z["p_top"].astype(np.float64)
        q_top = z["q_top"].astype(np.float64)
        p_out = z["p_out"].astype(np.float64)
        cols = {k: z[k] for k in _META_KEYS if k in z.files}
        vocab = int(z["vocab_size"])
    p = np.concatenate([p_top, p_out[:, None]], axis=1)
    p /= p.sum(axis=1, keepdims=True)
    q = np.concatenate([q_top, np.zeros((q_top.shape[0], 1))], axis=1)
    q /= q.sum(axis=1, keepdims=True)
    out: list[dict[str, Any]] = []
    for i in range(p.shape[0]):
        meta = {k: _py(v[i]) for k, v in cols.items()}
        meta["index"] = i
        meta["vocab_size"] = vocab
        out.append({"p": p[i], "q": q[i], "meta": meta})
    return out


def load_gemma3(path: str | Path | None = None) -> list[dict[str, Any]]:
    """Instances of the Gemma 3 270M suite (V = 262,144; data card ``instances/data/gemma3.md``),
    in the layout of :func:`load_smollm2`."""
    return load_smollm2(GEMMA3_PATH if path is None else path)
