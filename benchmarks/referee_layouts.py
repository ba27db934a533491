"""Verdict wall clocks of the referee on engines' layouts (issue 35), for docs/referee.md.

Each layout's lossless numpy stand-in (:mod:`otlp.referee.engines`, adapted as in the docs'
examples) is refereed at the defaults (60 cases, ε = 0.01, false alarm 1e-6) twice: in the
default mode (exact wherever it can follow the sampler) and forced statistical (``--mode
statistical``: the planned tests, the layout's calls batched as the layout allows: B rows a
call for ``chain`` and ``sglang_tree``, one tree a call for ``paths`` and
``candidate_logits``). Prints one line per verdict: layout, mode, status, cases, draws, wall
clock, and the part of it spent inside the sampler (the rest is the referee's).

    python benchmarks/referee_layouts.py [--modes auto,statistical] [--cases 60]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from otlp.referee import engines, referee
from otlp.verification.engine_layouts import target_laws


def vllm(draft_token_ids, logits, draft_probs, rng, temperature, top_k, top_p, bonus_token_ids):
    probs = target_laws(logits, temperature, top_k, top_p)
    return engines.vllm_rejection_sampler(probs, bonus_token_ids, draft_probs, draft_token_ids, rng)


vllm.logits, vllm.bonus = True, "referee"


def eagle(candidates, logits, draft_probs, rng, temperature, top_k, top_p):
    return engines.eagle_evaluate_posterior(logits, candidates, temperature, top_k, top_p, rng)


eagle.bonus = "referee"


SAMPLERS: dict[str, tuple[Any, str]] = {
    "chain": (vllm, "iid"),
    "paths": (eagle, "iid"),
    "sglang_tree": (engines.sglang_tree_sampler, "without_replacement"),
    "candidate_logits": (engines.transformers_speculative_sampling, "iid"),
}


class Timed:
    """``sampler`` with the seconds spent in its calls counted; its attributes pass through."""

    def __init__(self, sampler: Any) -> None:
        self.sampler, self.seconds = sampler, 0.0

    def __getattr__(self, name: str) -> Any:
        if name == "sampler":
            raise AttributeError(name)
        return getattr(self.sampler, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self.sampler(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="auto,statistical", help="comma-separated modes")
    parser.add_argument("--cases", type=int, default=60, help="cases per verdict")
    parser.add_argument("--layouts", default=",".join(SAMPLERS), help="comma-separated layouts")
    args = parser.parse_args(argv)
    for layout in args.layouts.split(","):
        sampler, scheme = SAMPLERS[layout]
        for mode in args.modes.split(","):
            timed = Timed(sampler)
            start = time.perf_counter()
            verdict = referee(
                timed, protocol=layout, scheme=scheme, cases=args.cases, mode=mode, name=layout
            )
            seconds = time.perf_counter() - start
            print(
                f"{layout:16s} {mode:11s} {verdict.status:9s} {verdict.exact_cases:3d} exact "
                f"{verdict.statistical_cases:3d} statistical {verdict.samples:>9,} draws "
                f"{seconds:7.1f} s ({timed.seconds:.1f} s in the sampler)",
                flush=True,
            )


if __name__ == "__main__":
    main()
