"""Wall-clock speed-up over autoregressive sampling, measured side by side on SmolLM2-135M.

The machine is shared: one run of a grid drifts with its load. Here every round decodes the
same prompts with ``ar`` and each configuration back to back (torch on one thread), over
``--rounds`` rounds, and the table reports per configuration the median over rounds of its
speed-up against the ``ar`` run of the same round, with block efficiency and the cost-model
terms of its last round.

    python benchmarks/bench_decode_speed.py --rounds 3
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from otlp.decoding.compare import DEFAULT_PROMPTS, Config, cost_markdown, run_configs
from otlp.decoding.models import smollm2

CONFIGS = (
    Config("sps", 1, 1, draft="skip4"),
    Config("gbv", 4, 1, draft="skip4"),
    Config("gbv", 2, 2, draft="skip4"),
    Config("spechub", 2, 1, draft="skip4"),
    Config("global_resolution", 4, 4, draft="skip4", top_k=100),
    Config("sps", 1, 4, draft="lookup"),
    Config("gbv", 1, 4, draft="lookup"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--temperature", type=float, default=1.0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    prompts = [smollm2.encode_prompt(p) for p in DEFAULT_PROMPTS[:2]]
    models = {}

    def factory(temperature: float, draft: str):  # type: ignore[no-untyped-def]
        if (temperature, draft) not in models:
            target = smollm2.target(temperature)
            models[(temperature, draft)] = (target, smollm2.draft(draft, temperature))
        return models[(temperature, draft)]

    configs = [Config(**{**c.__dict__, "temperature": args.temperature}) for c in CONFIGS]
    speedups: dict[int, list[float]] = {i: [] for i in range(len(configs))}
    last = {}
    for _ in range(args.rounds):
        for i, config in enumerate(configs):  # ar runs right before each config
            rows = run_configs(
                factory,
                prompts,
                [config],
                max_new_tokens=args.max_new_tokens,
                stop_tokens=(smollm2.eos_token_id(),),
            )
            speedups[i].append(rows[-1].speedup)
            last[i] = rows[-1]
    print(f"T = {args.temperature:g}, {args.rounds} rounds, {len(prompts)} prompts")
    print("| method | draft | K×L | top-k | block eff. | median speed-up (min–max) |")
    print("|---|---|---|---|---|---|")
    for i, config in enumerate(configs):
        s = speedups[i]
        print(
            f"| {config.method} | {config.draft} | {config.shape} | {config.top_k or '-'} "
            f"| {last[i].block_efficiency:.2f} ± {last[i].block_efficiency_se:.2f} "
            f"| {np.median(s):.2f} ({min(s):.2f}–{max(s):.2f}) |"
        )
    print()
    print(cost_markdown([last[i] for i in range(len(configs))]), end="")


if __name__ == "__main__":
    main()
