"""False alarms of the referee on lossless samplers whose randomness its exact mode cannot
follow (issue 35's goal: none): a torch.Generator, torch's global generator and Python's
``random``, the samplers of tests/test_referee_generators.py. One verdict per referee seed at
the defaults (60 cases, epsilon 0.01, planned false-alarm rate 1e-6 per verdict).

    python benchmarks/referee_false_alarms.py --seeds 20 [--python-seeds 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_referee_generators import python_random, torch_generator, torch_global

from otlp.referee import referee


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20, help="verdicts per torch sampler")
    parser.add_argument("--python-seeds", type=int, default=3, help="verdicts, Python sampler")
    args = parser.parse_args()
    print("| sampler | verdicts | false alarms | draws | seconds |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for sampler, seeds in (
        (torch_generator, args.seeds),
        (torch_global, args.seeds),
        (python_random, args.python_seeds),
    ):
        start, alarms, draws = time.perf_counter(), 0, 0
        for seed in range(seeds):
            verdict = referee(sampler, seed=seed)
            alarms += verdict.status != "lossless"
            draws += verdict.samples
        seconds = time.perf_counter() - start
        print(f"| `{sampler.__name__}` | {seeds} | {alarms} | {draws:,} | {seconds:.0f} |")


if __name__ == "__main__":
    main()
