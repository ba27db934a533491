"""False alarms of the referee on lossless samplers whose randomness its exact mode cannot
follow (issue 35's goal: none), one verdict per referee seed at the defaults (60 cases, epsilon
0.01, planned false-alarm rate 1e-6 per verdict):

* the fixed samplers of tests/test_referee_generators.py (a torch.Generator, torch's global
  generator, Python's ``random``), ``--seeds`` / ``--python-seeds`` verdicts each;
* ``--fuzzed N`` samplers drawn from the seeding patterns engines use
  (tests/referee_seeding.py: torch.manual_seed, a torch.Generator or one per row, numpy's
  legacy np.random.seed and Python's random.seed from the referee's integers at bounds 2**16
  to 2**63, seeded on every call, on the first call only or every seventh call; the
  generators the referee hands; two uniforms a row, a variable number, or a rejection loop),
  one verdict each, grouped by source.

    python benchmarks/referee_false_alarms.py --seeds 20 --python-seeds 3 --fuzzed 0
    python benchmarks/referee_false_alarms.py --seeds 0 --python-seeds 0 --fuzzed 240
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from referee_seeding import SOURCES, fuzzed
from test_referee_generators import python_random, torch_generator, torch_global

from otlp.referee import referee


def _row(label: str, verdicts: Iterable[tuple[Callable[..., Any], int]]) -> None:
    """One table row: ``label``, then the verdicts, false alarms, draws and seconds."""
    start, count, alarms, draws = time.perf_counter(), 0, 0, 0
    for sampler, seed in verdicts:
        verdict = referee(sampler, seed=seed)
        count += 1
        alarms += verdict.status != "lossless"
        draws += verdict.samples
        if verdict.status != "lossless":
            print(verdict.summary(), file=sys.stderr)
    seconds = time.perf_counter() - start
    print(f"| {label} | {count} | {alarms} | {draws:,} | {seconds:.0f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20, help="verdicts per torch sampler")
    parser.add_argument("--python-seeds", type=int, default=3, help="verdicts, Python sampler")
    parser.add_argument("--fuzzed", type=int, default=240, help="fuzzed seeding patterns")
    parser.add_argument("--fuzz-seed", type=int, default=0, help="seed of the fuzzed patterns")
    args = parser.parse_args()
    fixed = [
        (sampler, seeds)
        for sampler, seeds in (
            (torch_generator, args.seeds),
            (torch_global, args.seeds),
            (python_random, args.python_seeds),
        )
        if seeds
    ]
    if fixed:
        print("| sampler | verdicts | false alarms | draws | seconds |")
        print("| --- | ---: | ---: | ---: | ---: |")
    for sampler, seeds in fixed:
        _row(f"`{sampler.__name__}`", ((sampler, seed) for seed in range(seeds)))
    patterns = list(fuzzed(args.fuzzed, args.fuzz_seed))
    if patterns:
        print("\n| fuzzed source (`rng=`) | patterns | verdicts | false alarms | draws | seconds |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for source in SOURCES:
        mine = [(i, p) for i, p in enumerate(patterns) if p.source == source]
        if mine:
            distinct = len({p.name for _, p in mine})
            label = f"{source} (`{SOURCES[source][0]}`) | {distinct}"
            _row(label, ((p.sampler(), i) for i, p in mine))


if __name__ == "__main__":
    main()
