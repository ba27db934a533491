"""SmolLM2-135M-Instruct, the embedded default target, and its self-speculative drafts.

The GGUF file comes from :mod:`otlp.instances.realmodel.fetch` (``python -m
otlp.instances.realmodel.fetch``; it needs the ``llm`` extra: torch, transformers, gguf) and is
de-quantised to float32 once per process by :func:`load` (20–40 s here); every later call
returns the same objects.

Drafts (:func:`draft_layers`) name the decoder layers a draft runs, out of 30:

* ``exitN`` — early exit: the first N layers, then the final norm and ``lm_head``;
* ``skipN`` for N in 1, 2, 4, 7 — the layer-skip sets measured for the instance suite
  (:data:`otlp.instances.realmodel.generate.DRAFTS`: the layers whose removal hurt acceptance
  least, in that order);
* ``skip:3,17,25`` — any explicit set of skipped layers;
* ``lookup`` / ``lookupN`` / ``lookupNwW`` (:func:`draft`) — prompt lookup on n-grams up to N,
  on W paths (:mod:`otlp.decoding.models.lookup`), no layers at all.
"""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path
from typing import Any

from otlp.decoding.models import selfdraft
from otlp.decoding.models.base import TreeModel
from otlp.decoding.models.hf import HFTreeLM
from otlp.decoding.models.lookup import PromptLookup, lookup_spec
from otlp.decoding.models.prefix import PrefixLM

N_LAYERS = 30


def presets() -> dict[str, tuple[int, ...]]:
    """SmolLM2's named skip sets (``skip1``, ``skip2``, ``skip4``, ``skip7``)."""
    from otlp.instances.realmodel.generate import DRAFTS

    return {d.name: d.skip for d in DRAFTS if d.skip}


def draft_layers(spec: str, n_layers: int = N_LAYERS) -> list[int]:
    """The decoder layers a draft named ``spec`` runs (see the module docstring)."""
    return selfdraft.draft_layers(spec, n_layers, presets())


@functools.cache
def load() -> tuple[Any, Any]:
    """(tokenizer, transformers model) of SmolLM2, loaded once per process.

    The first load de-quantises the GGUF (:func:`otlp.instances.realmodel.generate.load_model`) and
    keeps the float32 weights, config and tokenizer next to it (``weights/float32-<sha>``,
    git-ignored, ~0.5 GB); later processes load those in a few seconds.
    """
    from otlp.instances.realmodel.fetch import SHA256, WEIGHTS_DIR
    from otlp.instances.realmodel.generate import load_model

    folder = WEIGHTS_DIR / f"float32-{SHA256[:12]}"
    if (folder / "model.pt").exists():
        return _load_float32(folder)
    tokenizer, model = load_model()
    _save_float32(tokenizer, model, folder)
    return tokenizer, model


def _save_float32(tokenizer: Any, model: Any, folder: Path) -> None:
    import torch

    partial = folder.with_name(f"{folder.name}.part{os.getpid()}")
    partial.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(partial)
    model.config.save_pretrained(partial)
    torch.save(model.state_dict(), partial / "model.pt")
    try:
        partial.replace(folder)
    except OSError:  # another process saved it first
        shutil.rmtree(partial)


def _load_float32(folder: Path) -> tuple[Any, Any]:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    config = AutoConfig.from_pretrained(str(folder))
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(torch.load(folder / "model.pt", mmap=True, weights_only=True))
    model.eval()
    return tokenizer, model


def target(temperature: float = 1.0) -> HFTreeLM:
    """The full SmolLM2 model as a tree model at ``temperature``."""
    return HFTreeLM(load()[1], temperature=temperature, name="smollm2")


def draft(spec: str, temperature: float = 1.0) -> TreeModel:
    """A self-speculative draft of SmolLM2 (:func:`draft_layers`), sharing its weights, or
    ``lookupN`` / ``lookupNwW``: prompt lookup on n-grams up to N (default 3) with W candidate
    continuations (default 1), no forward pass (:func:`otlp.decoding.models.lookup.lookup_spec`)."""
    if (parsed := lookup_spec(spec)) is not None:
        ngram, width = parsed
        vocab = int(load()[1].config.vocab_size)
        # Not tempered: the lookup law is no model's belief, and T = 0 would keep one candidate.
        return PrefixLM(PromptLookup(vocab, ngram=ngram, width=width), name=spec)
    layers = draft_layers(spec)
    return HFTreeLM(load()[1], layers=layers, temperature=temperature, name=spec)


def encode_prompt(text: str) -> list[int]:
    """Token ids of ``text`` as a user turn in SmolLM2's chat template, ready to continue."""
    tokenizer = load()[0]
    chat = tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
    )
    return [int(t) for t in tokenizer(chat).input_ids]


def decode_text(tokens: list[int]) -> str:
    return str(load()[0].decode(tokens, skip_special_tokens=True))


def eos_token_id() -> int:
    return int(load()[0].eos_token_id)
