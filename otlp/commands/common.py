"""Argument groups and helpers shared by subcommands."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from instances.generators import GENERATORS
from otlp.instance import SCHEMES, Instance

GENERATED_TOP_K = 20


def add_instance_arguments(parser: argparse.ArgumentParser) -> None:
    """--instance FILE, or --generator with its options; plus n, top-k and scheme."""
    source = parser.add_argument_group("instance")
    source.add_argument(
        "--instance",
        type=Path,
        help=".npz or .json file with arrays p and q (q may be n rows for 'independent'); "
        "may also hold n, scheme, top_k",
    )
    source.add_argument("--generator", choices=sorted(GENERATORS), default="zipf")
    source.add_argument("--vocab", type=int, default=1000, help="vocabulary size V")
    source.add_argument("--seed", type=int, default=0)
    source.add_argument("--temperature", type=float, default=1.0)
    source.add_argument("--similarity", type=float, default=0.7, help="zipf / spechub-toy")
    source.add_argument("--n", type=int, default=None, help="number of drafts (default 2)")
    source.add_argument(
        "--top-k",
        type=int,
        default=None,
        help=f"draft top-k (default: the file's, or {GENERATED_TOP_K} for generated instances)",
    )
    source.add_argument("--scheme", choices=SCHEMES, default=None, help="draft scheme")
    source.add_argument("--renormalize", action="store_true", help="rescale p and q to sum 1")


def instance_from_args(args: argparse.Namespace) -> Instance:
    """Build the instance the arguments describe; errors are ValueErrors naming the input."""
    stored: dict[str, Any] = {}
    if args.instance is not None:
        stored = read_instance_file(args.instance)
        p, q = stored["p"], stored["q"]
    else:
        gen = args.generator
        if gen == "dirichlet":
            p, q = GENERATORS[gen](args.vocab, seed=args.seed)
        else:
            p, q = GENERATORS[gen](
                args.vocab,
                temperature=args.temperature,
                similarity=args.similarity,
                seed=args.seed,
            )
    n = args.n if args.n is not None else int(stored.get("n", 2))
    scheme = args.scheme or str(stored.get("scheme", "iid"))
    default_top_k = stored.get("top_k") if args.instance is not None else GENERATED_TOP_K
    top_k = args.top_k if args.top_k is not None else default_top_k
    return Instance(
        p, q, n, scheme, None if top_k is None else int(top_k), renormalize=args.renormalize
    )


def read_instance_file(path: Path) -> dict[str, Any]:
    """Read p, q (and optional n, scheme, top_k) from a .npz or .json file."""
    if not path.exists():
        raise ValueError(f"--instance: no such file {path}")
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as data:
            stored = {key: data[key] for key in data.files}
        for key in ("n", "top_k"):
            if key in stored:
                stored[key] = int(stored[key])
        if "scheme" in stored:
            stored["scheme"] = str(stored["scheme"])
    elif path.suffix == ".json":
        try:
            stored = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise ValueError(f"--instance: {path} is not valid JSON ({exc})") from None
    else:
        raise ValueError(f"--instance: expected a .npz or .json file, got {path.suffix!r}")
    missing = {"p", "q"} - set(stored)
    if missing:
        raise ValueError(f"--instance: {path} lacks {', '.join(sorted(missing))}")
    return stored


def console() -> Console:
    """A rich console at least 120 columns wide, so tables are not squeezed when piped."""
    return Console(width=max(120, shutil.get_terminal_size((120, 24)).columns))
