"""``otlp referee``: is a sampler lossless, where does it fail, how far is it from α*?

Exit status (:data:`EXIT_STATUS`): 0 lossless on every searched case at the stated power;
1 a deviation found (the minimal case is written to the reproducer file); 2 bad usage (a flag
out of range, a sampler that cannot be imported, a malformed reproducer: one line naming it);
3 the sampler failed (it raised, broke its protocol or ran past ``--call-limit``: the
``error`` verdict, with the smallest case that makes it fail).

Like pytest, the command imports the sampler's module from the working directory: the
current directory is put first on ``sys.path`` (``python -m otlp.cli`` does that already, the
``otlp`` script does not).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from otlp.commands.common import (
    RESULTS_ROOT,
    Command,
    add_output_arguments,
    flag_type,
    int_at_least,
    output_path,
    print_json,
)

DEFAULT_OUT = RESULTS_ROOT / "referee"
EXIT_STATUS = {"lossless": 0, "deviation": 1, "error": 3}  # 2: bad usage (otlp.cli)


def positive_seconds(text: str) -> float:
    """A number of seconds > 0 given as text (for :func:`flag_type`)."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise ValueError(f"expected a finite number of seconds > 0, got {text}")
    return value


COMMAND = Command(
    summary="referee a speculative sampler: lossless?, minimal failing case, gap to alpha*",
    description="Run the sampler MODULE:FUNCTION on seeded cases of otlp fuzz's instance "
    "classes (position: V = 2..8, n = 1..3 drafts drawn by the referee under --scheme; "
    "tree: toy model pairs on small trees and chains) and compare its output law with the "
    "target's: exactly where its random draws can be followed (a branching stand-in for "
    "numpy's Generator), else by a Hoeffding test planned to detect TV >= --epsilon with "
    "probability >= 1 - --miss, flagging a lossless sampler with probability <= "
    "--false-alarm. A failing case is shrunk to a minimal one and written to a JSON "
    "reproducer (--replay re-runs it). The sampler's acceptance is shown beside alpha*. "
    "Position protocol: sampler(p, q, drafts, rng) -> token; tree protocol: "
    "sampler(tokens, parents, p, q, rng) -> (accepted nodes, bonus token). The "
    "sampler's module is imported from the working directory (as pytest does). Exit "
    "status 0 lossless, 1 deviation found, 2 bad usage, 3 the sampler failed (raised, "
    "broke its protocol or ran past --call-limit).",
    example="otlp referee otlp.referee.subjects:SUBJECTS.specinfer --protocol position",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "sampler",
        nargs="?",
        default=None,
        metavar="MODULE:FUNCTION",
        help="the sampler (dotted attributes allowed; not needed with --replay)",
    )
    parser.add_argument(
        "--protocol",
        choices=("position", "tree", "chain", "paths", "sglang_tree", "candidate_logits"),
        default=None,
        help="calling convention: otlp's position or tree protocol, or an engine's layout "
        "(chain: vLLM / FlashInfer; paths: EAGLE / Medusa; sglang_tree: SGLang; "
        "candidate_logits: transformers) (default: the sampler's `protocol` attribute, else "
        "position)",
    )
    parser.add_argument(
        "--rng",
        choices=("numpy", "torch", "torch-rows", "torch-global", "python"),
        default=None,
        help="the generator the sampler takes as its last argument: the referee's numpy "
        "Generator, a torch.Generator (one per call, or one per row), or None after the "
        "referee seeded torch's or Python's global generator (default: the sampler's `rng` "
        "attribute, else numpy; only numpy draws can be judged exactly)",
    )
    parser.add_argument(
        "--scheme",
        default=None,
        help="draft scheme: iid, without_replacement, independent (position); iid, "
        "without_replacement (tree) (default: the sampler's `scheme` attribute, else iid)",
    )
    parser.add_argument("--epsilon", type=float, default=0.01, help="TV the test must detect")
    parser.add_argument(
        "--false-alarm", type=float, default=1e-6, help="probability of flagging a lossless sampler"
    )
    parser.add_argument(
        "--miss", type=float, default=1e-3, help="probability of missing TV >= epsilon"
    )
    parser.add_argument(
        "--cases",
        type=flag_type(int_at_least(1), "int"),
        default=60,
        help="seeded cases to search",
    )
    parser.add_argument(
        "--seed",
        type=flag_type(int_at_least(0), "int"),
        default=0,
        help="seed of the cases and the draws (>= 0)",
    )
    parser.add_argument(
        "--call-limit",
        type=flag_type(positive_seconds, "seconds"),
        default=None,
        metavar="SECONDS",
        help="seconds one call of the sampler may take; a call that runs longer is an error "
        "verdict naming the case (default 10)",
    )
    parser.add_argument(
        "--mode",
        choices=("auto", "exact", "statistical"),
        default="auto",
        help="exact enumeration where possible (auto), only exact, or only statistical",
    )
    parser.add_argument(
        "--shapes",
        default=None,
        metavar="LIST",
        help="tree shapes, comma-separated (chain1,chain2,chain3,root2,root3,paths2x2,tree2x1,"
        "tree2x2, and the two branching three-deep shapes fork3,fork3x2; default: the sampler's "
        "`shapes`, else the first eight, chains only for a sampler declaring max_children = 1)",
    )
    parser.add_argument(
        "--max-n",
        type=flag_type(int_at_least(1), "int"),
        default=None,
        help="most drafts of a position case (default: the sampler's `max_children`, else 3)",
    )
    parser.add_argument(
        "--smollm2",
        type=flag_type(int_at_least(0), "int"),
        default=0,
        metavar="K",
        help="also search K SmolLM2-135M states (position protocol, statistical mode)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"reproducer file (default: {DEFAULT_OUT}/<sampler>.json)",
    )
    parser.add_argument(
        "--replay", type=Path, default=None, metavar="FILE", help="re-run a reproducer"
    )
    add_output_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from otlp.referee import load_sampler, referee, replay
    from otlp.referee.clock import DEFAULT_CALL_LIMIT

    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:  # the user's module, as pytest finds it
        sys.path.insert(0, here)
    call_limit = args.call_limit if args.call_limit is not None else DEFAULT_CALL_LIMIT
    if args.replay is not None:
        sampler, declared = load_sampler(args.sampler) if args.sampler else (None, {})
        verdict = replay(
            args.replay,
            sampler,
            args.sampler,
            declared=declared,
            call_limit=call_limit,
            rng=args.rng,
        )
    else:
        if args.sampler is None:
            raise ValueError("MODULE:FUNCTION: the sampler to referee is required (or --replay)")
        sampler, declared = load_sampler(args.sampler)
        out = args.out or DEFAULT_OUT / (re.sub(r"[^A-Za-z0-9_.-]+", "_", args.sampler) + ".json")
        output_path("--out", out, folder=False, mkdir=args.mkdir)
        shapes = None if args.shapes is None else [s for s in args.shapes.split(",") if s]
        children = declared.get("max_children")
        verdict = referee(
            sampler,
            protocol=args.protocol or declared.get("protocol"),
            scheme=args.scheme or declared.get("scheme"),
            epsilon=args.epsilon,
            false_alarm=args.false_alarm,
            miss=args.miss,
            cases=args.cases,
            seed=args.seed,
            mode=args.mode,
            shapes=shapes,
            max_n=args.max_n,
            max_children=None if children is None else int(children),
            smollm2=args.smollm2,
            reproducer=out,
            name=args.sampler,
            call_limit=call_limit,
            rng=args.rng or declared.get("rng"),
        )
    if args.json:
        print_json(verdict.as_dict())
    else:
        print(verdict.summary())
    return EXIT_STATUS[verdict.status]
