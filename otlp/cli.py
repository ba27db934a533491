"""The ``otlp`` command line. Each subcommand lives in a module of ``otlp.commands`` that
exposes ``register(subparsers)``; add a module's name to ``COMMANDS`` to add a subcommand."""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = (
    "otlp.commands.multistep",
    "otlp.commands.compare",
    "otlp.commands.solve",
    "otlp.commands.suites",
    "otlp.commands.bench",
    "otlp.commands.validate",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="otlp",
        description="Optimal-transport LPs for multi-draft speculative sampling.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        importlib.import_module(module).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except ValueError as exc:  # bad input: one clear line, no traceback
        print(f"otlp {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
