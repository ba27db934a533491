"""Tiny random transformers causal LMs for the tests of the Hugging Face adapters
(otlp.decoding.models.hf): a few layers and tokens, seeded, built in milliseconds."""

from __future__ import annotations

from typing import Any


def tiny_causal_lm(
    model_class: Any,
    *,
    vocab: int,
    width: int,
    layers: int,
    heads: int,
    positions: int,
    sharpen: float = 1.0,
    **config: Any,
) -> Any:
    """``model_class`` (a transformers causal LM) at random weights drawn with seed 0, in eval
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
    torch.manual_seed(0)
    model = model_class(settings)
    with torch.no_grad():
        model.lm_head.weight.mul_(sharpen)
    return model.eval()
