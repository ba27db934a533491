"""Tiny random transformers causal LMs for the tests of the Hugging Face adapters
(otlp.decoding.models.hf): a few layers and tokens, seeded, built in milliseconds; and the
check of the tree adapter's laws against a forward of each full prefix ([SpecInfer] tree
attention: a node sees exactly its ancestors)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def tiny_causal_lm(
    model_class: Any,
    *,
    vocab: int,
    width: int,
    layers: int,
    heads: int,
    positions: int,
    sharpen: float = 1.0,
    seed: int = 0,
    **config: Any,
) -> Any:
    """``model_class`` (a transformers causal LM) at random weights drawn with ``seed``, in eval
    mode: ``vocab`` tokens, hidden size ``width`` and an MLP twice as wide, ``layers`` layers
    of ``heads`` attention heads sharing ``heads // 2`` key-value heads, ``positions``
    positions, the output head scaled by ``sharpen`` (laws sharper than the default init's);
    ``config``: the family's own fields."""
    import torch

    settings = model_class.config_class(
        vocab_size=vocab,
        hidden_size=width,
        intermediate_size=2 * width,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads // 2,
        max_position_embeddings=positions,
        **config,
    )
    torch.manual_seed(seed)
    model = model_class(settings)
    with torch.no_grad():
        model.lm_head.weight.mul_(sharpen)
    return model.eval()


def tree_forward_error(
    adapter: Any, reference: Callable[[list[int]], np.ndarray], prompts: list[list[int]], vocab: int
) -> float:
    """Largest difference between the tree laws of ``adapter`` (an ``HFTreeLM``) and
    ``reference`` (the law after a full prefix) over three steps of a 5-node tree on the two
    rows of ``prompts``, random tokens below ``vocab``; each step accepts nodes 1 then 4 in row
    0 (not contiguous in the cache) and nothing in row 1, after which the cache holds bytes."""
    session = adapter.session(prompts)
    parents = np.array([-1, -1, 0, 2, 1])
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(3):
        tokens = rng.integers(0, vocab, size=(2, 5))
        laws = session.forward(tokens, parents, np.array([0, 1]))
        for r in range(2):
            context = session.context(r)
            worst = max(worst, np.abs(laws[r, 0] - reference(context)).max())
            for node in range(5):
                path, at = [], node
                while at >= 0:
                    path.append(int(tokens[r, at]))
                    at = parents[at]
                want = reference(context + path[::-1])
                worst = max(worst, np.abs(laws[r, node + 1] - want).max())
        session.commit(np.array([0, 1]), [[*tokens[0, [1, 4]], 9], [2]], [[1, 4], []])
        assert session.cache_bytes() > 0
    return float(worst)
