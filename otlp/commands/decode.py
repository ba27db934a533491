"""``otlp decode``: speculative decoding on SmolLM2-135M (or a toy model pair) with any
verification method; ``--compare`` runs methods side by side, ``--config`` a benchmark grid."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from otlp.commands.common import (
    CommaList,
    add_command,
    add_output_arguments,
    add_progress_argument,
    check_names,
    console,
    name_item,
    output_path,
    positive_int_item,
    print_json,
    progress_enabled,
    stderr_note,
)
from otlp.commands.decode_report import RunLog, cut_at_stop, table
from otlp.decoding.compare import (
    Config,
    Grid,
    ModelFactory,
    Run,
    cost_markdown,
    markdown,
    read_grid,
    run_configs,
    schedule,
    valid,
)
from otlp.decoding.engine import AUTOREGRESSIVE, DecodeResult
from otlp.decoding.models.base import TreeModel
from otlp.decoding.models.lookup import lookup_spec
from otlp.decoding.prompts import PROMPT_SETS
from otlp.decoding.verify import METHODS
from otlp.plotting.style import add_format_argument

MODELS = ("smollm2", "toy")
DEFAULT_DRAFT = "skip4"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(
        subparsers,
        "decode",
        summary="speculative decoding on a real model: text and step statistics",
        description="Decode prompts with SmolLM2-135M-Instruct (the llm extra; weights from "
        "python -m instances.realmodel.fetch) or a toy model pair, drafting K paths of L "
        "tokens from a self-speculative draft (exitN: the first N of 30 layers; skipN / "
        "skip:i,j: layers skipped) and verifying with one lossless method. --compare runs "
        "several methods. Autoregressive sampling from the same target (ar) always runs "
        "too: every speed-up is measured against it, ar and the methods alternating in "
        "--rounds rounds on the same prompts and seeds, each run decoding exactly "
        "--max-new-tokens tokens per prompt (stop tokens are not honoured in these timing "
        "runs; printed texts end at the first). --config runs the [decode] grid of a TOML "
        "file and writes its table and plots to --out.",
        example="otlp decode --prompt 'Tell me a joke.' --method gbv --paths 4 --depth 4",
    )
    parser.add_argument(
        "--prompt",
        action="append",
        default=None,
        metavar="TEXT",
        help="a prompt (repeatable; default: the --prompts set); --model toy: token ids "
        "'1,2,3' or empty",
    )
    parser.add_argument(
        "--prompts",
        choices=tuple(PROMPT_SETS),
        default="free",
        help="built-in prompt set when no --prompt is given: free (open-ended text), grounded "
        "(answers that copy from the input: extraction, corrections, code edits) or both",
    )
    parser.add_argument("--model", choices=MODELS, default="smollm2", help="target model")
    parser.add_argument(
        "--draft",
        default=DEFAULT_DRAFT,
        help="SmolLM2 draft: exitN, skipN (1, 2, 4, 7), skip:i,j,..., lookupN (prompt "
        "lookup on n-grams up to N) or lookupNwW (W candidate continuations: W paths)",
    )
    parser.add_argument(
        "--method",
        type=name_item,
        default="gbv",
        help="verification method (ar is added: the speed-up is measured against it)",
    )
    parser.add_argument("--paths", type=int, default=4, help="draft paths K")
    parser.add_argument("--depth", type=int, default=4, help="draft tokens per path L")
    parser.add_argument(
        "--branching",
        action=CommaList,
        item=positive_int_item,
        default=[],
        metavar="LIST",
        help="a static k-ary draft tree instead of K paths (children per node at each depth)",
    )
    parser.add_argument("--scheme", default=None, help="draft scheme (default: the method's)")
    parser.add_argument("--top-k", type=int, default=None, help="restrict drafts to top k")
    parser.add_argument("--temperature", type=float, default=1.0, help="0 = greedy")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="tokens per prompt")
    parser.add_argument("--seed", type=int, default=0, help="seed (one generator per prompt)")
    parser.add_argument(
        "--compare",
        action=CommaList,
        item=name_item,
        default=[],
        metavar="LIST",
        help="methods to run side by side (ar is always added)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="interleaved timing rounds (ar and every method once per round; the speed-up "
        "is the median over rounds, with its min-max)",
    )
    parser.add_argument("--config", type=Path, default=None, help="a TOML file with [decode]")
    parser.add_argument("--out", type=Path, default=None, help="folder for --config outputs")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (1: on a shared CPU more threads wait on each other)",
    )
    toy = parser.add_argument_group("toy model pair (--model toy)")
    toy.add_argument("--vocab", type=int, default=8, help="vocabulary size")
    toy.add_argument("--distance", type=float, default=0.5, help="draft = mix with noise")
    add_format_argument(parser)
    add_output_arguments(parser)
    add_progress_argument(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    for flag in ("paths", "depth", "max_new_tokens", "vocab", "threads", "rounds"):
        if getattr(args, flag) < 1:
            raise ValueError(f"--{flag.replace('_', '-')}: expected a positive integer")
    if args.out is not None and args.config is None:
        raise ValueError("--out: only with --config")
    grid = read_grid(args.config) if args.config is not None else None
    if args.out is not None:
        output_path("--out", args.out, folder=True, mkdir=args.mkdir)
    model = grid.model if grid is not None else args.model
    if model not in MODELS:
        raise ValueError(f"model: expected one of {', '.join(MODELS)}, got {model!r}")
    factory, prompts, texts, stops = _setup(args, model, grid)
    if grid is not None:
        return _run_grid(args, grid, factory, prompts)
    methods = [args.method] if not args.compare else list(dict.fromkeys(args.compare))
    check_names("--compare" if args.compare else "--method", methods, [AUTOREGRESSIVE, *METHODS])
    configs = [
        Config(
            method,
            args.paths,
            args.depth,
            args.temperature,
            args.draft if model == "smollm2" else "",
            scheme=args.scheme,
            top_k=args.top_k,
            branching=tuple(args.branching),
        )
        for method in methods
        if method != AUTOREGRESSIVE
    ]
    for config in configs:
        if not valid(config.method, config.paths, config.branching):
            raise ValueError(f"--method: {config.method} does not verify a {config.shape} tree")
    outputs: dict[str, DecodeResult] = {}
    log = RunLog(schedule(configs, args.rounds), enabled=progress_enabled(args))

    def done(run: Run) -> None:
        if run.round == 0:
            outputs[run.config.method] = run.result
        log(run)

    rows = run_configs(
        factory,
        prompts,
        configs,
        max_new_tokens=args.max_new_tokens,
        rounds=args.rounds,
        seed=args.seed,
        done=done,
    )
    shown = {
        method: [cut_at_stop(tokens, stops) for tokens in result.tokens]
        for method, result in outputs.items()
    }
    if args.json:
        print_json(
            {
                "rows": [r.as_dict() for r in rows],
                "texts": {m: [texts(t) for t in tokens] for m, tokens in shown.items()},
            }
        )
        return 0
    out = console()
    if not args.compare:
        method = configs[0].method
        for i, tokens in enumerate(shown[method]):
            label = _prompt_label(args, i).replace("\n", " ")
            out.print(f"[bold]{method}, prompt {i + 1}[/bold]: {label}", markup=True)
            out.print(texts(tokens), markup=False, highlight=False)
            out.print()
    if args.markdown:
        print(markdown(rows) + "\n" + cost_markdown(rows), end="")
    else:
        out.print(table(rows))
    return 0


def _prompt_label(args: argparse.Namespace, i: int) -> str:
    prompts = args.prompt or list(PROMPT_SETS[args.prompts])
    return prompts[i] if i < len(prompts) else ""


def _setup(args: argparse.Namespace, model: str, grid: Grid | None) -> tuple[Any, ...]:
    """(model factory, prompt token ids, token-ids-to-text, stop tokens)."""
    if grid is not None:
        texts = list(grid.prompts)
    else:
        texts = args.prompt or list(PROMPT_SETS[args.prompts])
    if model == "toy":
        return _toy(args, texts)
    from otlp.decoding.models import smollm2

    try:
        import torch

        torch.set_num_threads(args.threads)
        smollm2.load()
    except ImportError as exc:
        raise ValueError(f"--model smollm2: {exc}; install the llm extra") from None
    except SystemExit as exc:  # missing torch/transformers or weights: one line, exit 2
        raise ValueError(f"--model smollm2: {exc}") from None
    cache: dict[tuple[float, str], tuple[TreeModel, TreeModel]] = {}
    drafts = grid.drafts if grid is not None else (args.draft,)
    for name in drafts:
        if lookup_spec(name) is None:
            smollm2.draft_layers(name)  # bad names fail before any decoding

    def factory(temperature: float, draft: str) -> tuple[TreeModel, TreeModel]:
        key = (temperature, draft)
        if key not in cache:
            cache[key] = (smollm2.target(temperature), smollm2.draft(draft, temperature))
        return cache[key]

    prompts = [smollm2.encode_prompt(t) for t in texts]
    return factory, prompts, smollm2.decode_text, (smollm2.eos_token_id(),)


def _toy(args: argparse.Namespace, texts: Sequence[str]) -> tuple[Any, ...]:
    from otlp.decoding.models.prefix import PrefixLM
    from otlp.multistep.models import model_pair

    target, draft = model_pair("markov", args.vocab, seed=args.seed, distance=args.distance)
    prompts = []
    for text in texts:
        builtin = text in PROMPT_SETS["both"]
        ids = [] if builtin else [s for s in text.split(",") if s.strip()]
        try:
            tokens = [int(s) for s in ids]
        except ValueError:
            raise ValueError(
                f"--prompt: toy prompts are token ids like 1,2,3, got {text!r}"
            ) from None
        if any(not 0 <= t < args.vocab for t in tokens):
            raise ValueError(f"--prompt: toy token ids must lie in [0, {args.vocab})")
        prompts.append(tokens)

    def factory(temperature: float, name: str) -> tuple[TreeModel, TreeModel]:
        return (
            PrefixLM(target, temperature=temperature, name="toy target"),
            PrefixLM(draft, temperature=temperature, name="toy draft"),
        )

    return factory, prompts, lambda tokens: " ".join(map(str, tokens)), ()


def _run_grid(
    args: argparse.Namespace, grid: Grid, factory: ModelFactory, prompts: list[list[int]]
) -> int:
    configs = grid.configs()
    log = RunLog(schedule(configs, grid.rounds), enabled=progress_enabled(args))
    rows = run_configs(
        factory,
        prompts,
        configs,
        max_new_tokens=grid.max_new_tokens,
        rounds=grid.rounds,
        seed=grid.seed,
        done=log,
    )
    text = markdown(rows) + "\n" + cost_markdown(rows)
    if args.out is not None:
        (args.out / "decode.md").write_text(text)
        (args.out / "decode.json").write_text(json.dumps([r.as_dict() for r in rows], indent=1))
        from otlp.plotting.decoding import plot

        for written in plot(rows, args.out / "block_efficiency", args.format):
            stderr_note(f"wrote {written}")
        stderr_note(f"wrote {args.out / 'decode.md'} and decode.json")
    if args.json:
        print_json([r.as_dict() for r in rows])
    elif args.markdown or args.out is not None:
        print(text, end="")
    else:
        console().print(table(rows))
    return 0
