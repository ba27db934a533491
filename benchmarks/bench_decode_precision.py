"""The CPU fast path on a real model: forward cost in float32, bfloat16 and int8 (dynamic
quantisation of the linear layers), and how far each moves the next-token laws from float32.

Per round, every precision in turn (the order rotates each round, so that none always runs
first) opens a session on the same prompt, fills its KV cache (not timed), then times

* a one-token step: one committed token through the cached model, as autoregressive sampling
  does per token;
* a tree step: one committed token and a 4 × 4 path tree (17 tokens) in one forward, as a
  speculative step with K = 4 paths of L = 4 tokens does;

each including the float64 softmax the decode loop takes. Torch runs on one thread; one
warm-up round per precision is not counted. The table gives the median over rounds (min–max),
the machine's 1-minute load average before and after, and the fidelity to float32
(:func:`otlp.decoding.models.precision.fidelity`: mean KL and TV of next-token laws at every
position of the teacher-forced prompt suite, T = 1).

    python benchmarks/bench_decode_precision.py --rounds 10
    python benchmarks/bench_decode_precision.py --model path/to/model --rounds 5
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np
import torch

from otlp.decoding.grid import DEFAULT_PROMPTS
from otlp.decoding.models.hf import HFTreeLM
from otlp.decoding.models.pair import load_model_pair
from otlp.decoding.models.precision import PRECISIONS, convert, fidelity, suite_sequences
from otlp.verification.shapes import path_tree

TREE = path_tree(4, 4)


def step_times(model: Any, prompt: list[int]) -> tuple[float, float]:
    """Seconds of a one-token step and of a 17-token tree step after ``prompt``."""
    session = HFTreeLM(model).session([prompt])
    rows, empty = np.array([0]), np.zeros((1, 0), dtype=np.int64)
    session.forward(empty, np.zeros(0, dtype=np.int64), rows)  # fill the cache
    session.commit(rows, [[prompt[-1]]], [[]])
    start = time.perf_counter()
    session.forward(empty, np.zeros(0, dtype=np.int64), rows)
    one = time.perf_counter() - start
    session.commit(rows, [[prompt[-1]]], [[]])
    tokens = np.resize(np.array(prompt, dtype=np.int64), (1, len(TREE)))
    start = time.perf_counter()
    session.forward(tokens, TREE, rows)
    return one, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2", help="smollm2 or a model path")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(1)
    pair = load_model_pair(args.model)
    reference = pair.target_model
    models = {p: convert(reference, p) for p in PRECISIONS}
    prompt = pair.encode_prompt(DEFAULT_PROMPTS[0])
    load_before = os.getloadavg()[0]
    for model in models.values():  # warm-up, not counted
        step_times(model, prompt)
    times: dict[str, list[tuple[float, float]]] = {p: [] for p in PRECISIONS}
    for r in range(args.rounds):
        order = PRECISIONS[r % len(PRECISIONS) :] + PRECISIONS[: r % len(PRECISIONS)]
        for precision in order:
            times[precision].append(step_times(models[precision], prompt))
    load_after = os.getloadavg()[0]
    sequences = suite_sequences(pair.tokenizer)
    print(
        f"{pair.name}, torch {torch.__version__} on 1 thread, {args.rounds} interleaved rounds "
        f"(+1 warm-up), prompt of {len(prompt)} tokens, load average {load_before:.1f} → "
        f"{load_after:.1f}"
    )
    print()
    print(
        "| precision | one-token step ms | 17-token tree step ms | tree / one token "
        "| mean KL vs float32 | mean TV | max TV |"
    )
    print("|---|---|---|---|---|---|---|")
    for precision in PRECISIONS:
        one, tree = (np.array(x) * 1e3 for x in zip(*times[precision], strict=True))
        fid = fidelity(reference, models[precision], sequences, precision)
        print(
            f"| {precision} | {np.median(one):.1f} ({one.min():.1f}–{one.max():.1f}) "
            f"| {np.median(tree):.1f} ({tree.min():.1f}–{tree.max():.1f}) "
            f"| {np.median(tree / one):.2f} | {fid.mean_kl:.2e} | {fid.mean_tv:.4f} "
            f"| {fid.max_tv:.3f} |"
        )
    print()
    print(f"fidelity over {fid.positions} next-token laws of {fid.sequences} texts")


if __name__ == "__main__":
    main()
