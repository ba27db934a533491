"""``otlp suites``: list the instance suites that ``otlp.instances.load`` knows."""

from __future__ import annotations

import argparse

from otlp.commands.common import Command, print_json
from otlp.instances.suites import load, suite_names

COMMAND = Command(
    summary="list the instance suites (names for --suite)",
    description="List every registered instance suite with its number of (p, q) pairs and "
    "a description; the names are what --suite of compare and bench take.",
    example="otlp suites --json",
)


def run(args: argparse.Namespace) -> int:
    rows = [
        {"name": name, "pairs": len(load(name)), "description": description}
        for name, description in suite_names().items()
    ]
    if args.json:
        print_json(rows)
        return 0
    for row in rows:
        print(f"{row['name']:14s} {row['pairs']:4d} pairs  {row['description']}")
    return 0
