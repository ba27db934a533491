"""The decode loop's block efficiency on a toy context-free pair against the exact per-call
expectation of :mod:`otlp.multistep.exact` (every step has the same law, so the mean over
steps estimates it). One Markdown row per method: Monte Carlo ± standard error, exact, z.

    python benchmarks/bench_decode_toy.py
"""

from __future__ import annotations

from otlp.decoding.loop import Speculation, decode
from otlp.decoding.models import PrefixLM
from otlp.multistep.exact import expected_accepted
from otlp.multistep.models import model_pair

# (engine method, K, L) -> (otlp.multistep.exact method, options)
CASES = {
    ("sps", 1, 3): ("token", {}),
    ("block", 1, 3): ("block", {}),
    ("gbv", 2, 3): ("gbv", {}),
    ("gbv", 4, 2): ("gbv", {}),
    ("rrs", 3, 2): ("spectr", {"rule": "rrs"}),
    ("kseq", 2, 2): ("spectr", {"rule": "kseq"}),
    ("maxflow_cs", 2, 2): ("spectr", {"rule": "ot"}),
    ("global_resolution", 2, 2): ("spectr", {"rule": "global_resolution"}),
}


def main() -> None:
    target, draft = model_pair("context-free", 6, seed=3, distance=0.6)
    print("| method | K×L | Monte Carlo | exact | z |")
    print("|---|---|---|---|---|")
    for (method, paths, depth), (name, options) in CASES.items():
        spec = Speculation.paths(method, paths, depth)
        result = decode(
            PrefixLM(target), PrefixLM(draft), [[]] * 400, spec, max_new_tokens=25, seed=1
        )
        exact = 1 + expected_accepted(target, draft, depth, name, paths, **options)
        z = (result.block_efficiency - exact) / result.block_efficiency_se
        print(
            f"| {method} | {paths}x{depth} | {result.block_efficiency:.4f} ± "
            f"{result.block_efficiency_se:.4f} | {exact:.4f} | {z:+.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
