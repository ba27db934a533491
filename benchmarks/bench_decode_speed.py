"""Wall-clock speed-up over autoregressive sampling on SmolLM2-135M, interleaved.

The machine is shared and its load drifts. :func:`otlp.decoding.grid.run_configs` runs
``ar`` and every configuration back to back in each of ``--rounds`` rounds (alternating order,
the same prompts and seeds, batch 1, exactly ``--max-new-tokens`` tokens per prompt), so each
round's speed-up compares the same work in two adjacent runs; the table gives the median over
rounds with the min–max and the 1-minute load average at the start of the runs, then the
cost-model terms (per-step means over all rounds). The model loads once per process.

    python benchmarks/bench_decode_speed.py --prompts grounded --rounds 3
    python benchmarks/bench_decode_speed.py --prompts free --rounds 3
    python benchmarks/bench_decode_speed.py --prompts grounded --rounds 3 --configs shapes
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from otlp.commands.decode_report import RunLog
from otlp.decoding.grid import Config, cost_markdown, markdown, run_configs, schedule
from otlp.decoding.models import smollm2
from otlp.decoding.models.base import TreeModel
from otlp.decoding.prompts import PROMPT_SETS

# Single-path lookup against multi-path lookup (W candidate continuations drawn without
# replacement: exactly the W candidates, verified by RRS without replacement), and the best
# layer-skipping draft.
CONFIGS = (
    Config("sps", 1, 4, draft="lookup3"),
    Config("rrs_without_replacement", 2, 4, draft="lookup3w2"),
    Config("rrs_without_replacement", 2, 2, draft="lookup3w2"),
    Config("spechub", 2, 1, draft="skip4"),
)
# More lookup shapes: shorter and longer single paths, wider trees.
SHAPES = (
    Config("rrs_without_replacement", 4, 4, draft="lookup3w4"),
    Config("gbv", 2, 4, draft="lookup3w2"),
    Config("sps", 1, 2, draft="lookup3"),
    Config("sps", 1, 3, draft="lookup3"),
    Config("sps", 1, 6, draft="lookup3"),
    Config("rrs_without_replacement", 2, 2, draft="lookup3w2"),
    Config("rrs_without_replacement", 2, 3, draft="lookup3w2"),
    Config("rrs_without_replacement", 3, 2, draft="lookup3w3"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", choices=tuple(PROMPT_SETS), default="grounded")
    parser.add_argument("--count", type=int, default=2, help="the first COUNT prompts of the set")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--configs", choices=("main", "shapes"), default="main")
    parser.add_argument("--drafts", default="", help="only configs with these drafts (a,b)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    started = time.perf_counter()
    smollm2.load()
    print(f"model loaded in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    texts = PROMPT_SETS[args.prompts][: args.count]
    prompts = [smollm2.encode_prompt(p) for p in texts]
    models: dict[tuple[float, str], tuple[TreeModel, TreeModel]] = {}

    def factory(temperature: float, draft: str) -> tuple[TreeModel, TreeModel]:
        if (temperature, draft) not in models:
            target = smollm2.target(temperature)
            models[(temperature, draft)] = (target, smollm2.draft(draft, temperature))
        return models[(temperature, draft)]

    wanted = set(args.drafts.split(",")) if args.drafts else None
    configs = [
        Config(**{**c.__dict__, "temperature": args.temperature})
        for c in (CONFIGS if args.configs == "main" else SHAPES)
        if wanted is None or c.draft in wanted
    ]
    rows = run_configs(
        factory,
        prompts,
        configs,
        max_new_tokens=args.max_new_tokens,
        rounds=args.rounds,
        done=RunLog(schedule(configs, args.rounds), enabled=True),
    )
    print(
        f"{args.prompts} prompts ({len(prompts)}), T = {args.temperature:g}, "
        f"{args.max_new_tokens} tokens per prompt, {args.rounds} interleaved rounds, batch 1\n"
    )
    print(markdown(rows))
    print(cost_markdown(rows), end="")


if __name__ == "__main__":
    main()
