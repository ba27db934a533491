"""Self-speculative drafts of SmolLM2-135M: how often each agrees with the target.

Three built-in prompts are continued by 100 tokens sampled from the target (T = 1, seed 0);
along those sequences, one teacher-forced forward per model gives the target's and each
draft's next-token laws, and the script prints the mean single-draft acceptance
sum_x min(p(x), q(x)) at T = 1 and T = 0.6 and how often the two argmaxes agree.

    python benchmarks/bench_decode_drafts.py exit4,exit8,exit12,exit20,skip4,skip7
"""

from __future__ import annotations

import sys

import numpy as np
import torch

from otlp.decoding.grid import DEFAULT_PROMPTS
from otlp.decoding.loop import Speculation, decode
from otlp.decoding.models import smollm2
from otlp.decoding.models.hf import HFTreeLM, KVCache


def logits_along(model: HFTreeLM, seq: list[int], start: int) -> torch.Tensor:
    """Logits predicting seq[start:], one causal forward."""
    n = len(seq)
    mask = torch.ones(n, n, dtype=torch.bool).tril()
    want = list(range(start - 1, n - 1))
    return model.logits(torch.as_tensor(seq), torch.arange(n), mask, KVCache(), want).double()


def main() -> None:
    specs = sys.argv[1].split(",") if len(sys.argv) > 1 else ["exit8", "skip4", "skip7"]
    target = smollm2.target(1.0)
    prompts = [smollm2.encode_prompt(p) for p in DEFAULT_PROMPTS[:3]]
    sampled = decode(target, None, prompts, Speculation.autoregressive(), max_new_tokens=100)
    seqs = [p + t for p, t in zip(prompts, sampled.tokens, strict=True)]
    ref = [logits_along(target, s, len(p)) for s, p in zip(seqs, prompts, strict=True)]
    print("| draft | layers run | acceptance T=1 | acceptance T=0.6 | argmax agreement |")
    print("|---|---|---|---|---|")
    for spec in specs:
        draft = smollm2.draft(spec)
        got = [logits_along(draft, s, len(p)) for s, p in zip(seqs, prompts, strict=True)]
        accept = [
            np.mean(
                [
                    torch.minimum((x / t).softmax(-1), (y / t).softmax(-1)).sum(-1).mean().item()
                    for x, y in zip(ref, got, strict=True)
                ]
            )
            for t in (1.0, 0.6)
        ]
        pairs = zip(ref, got, strict=True)
        agree = np.mean([(x.argmax(-1) == y.argmax(-1)).double().mean().item() for x, y in pairs])
        print(
            f"| {spec} | {len(draft.layer_ids)} | {accept[0]:.3f} | {accept[1]:.3f} "
            f"| {agree:.3f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
