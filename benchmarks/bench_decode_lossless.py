"""Losslessness of the decode loop on SmolLM2-135M: a chi^2 test of the first two tokens.

For each method the engine decodes the same prompt ``--samples`` times (two tokens each, one
generator per sample) with target and draft wrapped as memoised functions of prefixes
(:class:`otlp.decoding.models.Memoized`), so that every context is evaluated once however
often the draft trees revisit it. The empirical joint law of the first two generated tokens is
tested against the target's own law p(a) p(b | a) (read from the same memo): pairs expected at
least 5 times are their own cells, the rest one lumped cell.

    python -m instances.realmodel.fetch
    python benchmarks/bench_decode_lossless.py --samples 20000

Prints one Markdown row per method: samples, cells, chi^2, degrees of freedom, p-value.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats

from otlp.decoding.engine import Speculation, decode
from otlp.decoding.models import Memoized, PrefixLM
from otlp.decoding.models import smollm2 as smol

METHODS = ("sps:1x2", "block:1x2", "rrs:2x2", "spechub:2x1", "gbv:2x2", "global_resolution:2x2")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--methods", default=",".join(METHODS), help="method:KxL,...")
    parser.add_argument("--samples", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=32, help="rows per decode call")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--draft", default="skip4")
    parser.add_argument("--prompt", default="What is the capital of France?")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    smol.load()
    prompt = smol.encode_prompt(args.prompt)
    target_fn = Memoized(smol.target(1.0).prefix_laws)
    draft_fn = Memoized(smol.draft(args.draft, 1.0).prefix_laws)
    vocab = smol.load()[1].config.vocab_size
    target = PrefixLM(target_fn, vocab_size=vocab, temperature=args.temperature, name="smollm2")
    draft = PrefixLM(draft_fn, vocab_size=vocab, temperature=args.temperature, name=args.draft)
    print(f"prompt {args.prompt!r}, T = {args.temperature:g}, draft {args.draft}")
    print("| method | K×L | samples | cells | chi² | dof | p-value | seconds |")
    print("|---|---|---|---|---|---|---|---|")
    for item in args.methods.split(","):
        method, shape = item.split(":")
        paths, depth = (int(x) for x in shape.split("x"))
        spec = Speculation.paths(method, paths, depth)
        started = time.perf_counter()
        pairs = []
        for start in range(0, args.samples, args.batch):
            rows = min(args.batch, args.samples - start)
            seeds = list(range(start, start + rows))
            out = decode(target, draft, [prompt] * rows, spec, max_new_tokens=2, seed=seeds)
            pairs.extend((t[0], t[1]) for t in out.tokens)
        chi2, dof, pvalue, cells = chi_square(pairs, target, prompt)
        seconds = time.perf_counter() - started
        print(
            f"| {method} | {shape} | {len(pairs)} | {cells} | {chi2:.1f} | {dof} | {pvalue:.3f} "
            f"| {seconds:.0f} |",
            flush=True,
        )
    print(f"distinct contexts evaluated: target {len(target_fn.laws)}, draft {len(draft_fn.laws)}")


def chi_square(
    pairs: list[tuple[int, int]], target: PrefixLM, prompt: list[int]
) -> tuple[float, int, float, int]:
    """chi^2 of the observed pairs against p(a) p(b | a); cells expected >= 5, rest lumped."""
    n = len(pairs)
    first = target.laws([prompt])[0]
    counts: dict[tuple[int, int], int] = {}
    for pair in pairs:
        counts[pair] = counts.get(pair, 0) + 1
    # Candidate cells: every observed pair and the likeliest continuations of likely firsts.
    candidates = set(counts)
    for a in np.flatnonzero(first * n >= 5):
        second = target.laws([[*prompt, int(a)]])[0]
        candidates.update((int(a), int(b)) for b in np.flatnonzero(first[a] * second * n >= 5))
    expected = {}
    for a, b in candidates:
        expected[(a, b)] = n * first[a] * target.laws([[*prompt, a]])[0, b]
    cells = [c for c in candidates if expected[c] >= 5]
    observed = np.array(
        [counts.get(c, 0) for c in cells] + [n - sum(counts.get(c, 0) for c in cells)]
    )
    wanted = np.array([expected[c] for c in cells] + [n - sum(expected[c] for c in cells)])
    if wanted[-1] < 5:  # lump too small: fold it into the largest cell
        big = int(np.argmax(wanted[:-1]))
        observed[big] += observed[-1]
        wanted[big] += wanted[-1]
        observed, wanted = observed[:-1], wanted[:-1]
    chi2, pvalue = stats.chisquare(observed, wanted * n / wanted.sum())
    return float(chi2), len(observed) - 1, float(pvalue), len(observed)


if __name__ == "__main__":
    main()
