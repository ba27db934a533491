"""``otlp suites``: list the instance suites that ``instances.load`` knows."""

from __future__ import annotations

import argparse

from instances.suites import load, suite_names


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("suites", help="list instance suites")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    for name, description in suite_names().items():
        print(f"{name:14s} {len(load(name)):4d} pairs  {description}")
    return 0
