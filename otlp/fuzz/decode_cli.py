"""Fuzz cases and checks for ``otlp decode`` on the toy model pair (no real model is loaded).

A ``"decode_cli"`` case is an argument list: ``decode --model toy`` with a one-prompt, few-token
run and random valid flags (method, paths, depth, branching, scheme, top-k, temperature, seed,
vocabulary, distance, ...), and in most cases one *planted* invalid flag (a value of 0,
negative, 1e9, not a number, a huge toy vocabulary, a flag that does not apply: ``--vocab`` or
``--distance`` with ``--model smollm2``, ``--precision`` or ``--draft`` with the toy pair).
The check (:func:`check_decode_cli`) runs the command in-process with the model loader
replaced by one that fails the check if called (a refusal must come before any weights
load) and asks for exit 0, or exit 2 with exactly one stderr line naming a flag — the planted
one where there is one (a planted flag is never accepted), within :data:`REFUSAL_S` seconds;
never an internal error (exit 1) or a traceback.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

import numpy as np

from otlp.fuzz.referee_inputs import REFUSAL_S, run_cli

DECODE_METHODS = (
    "sps",
    "rrs",
    "kseq",
    "block",
    "gbv",
    "global_resolution",
    "maxflow_cs",
    "rrs_without_replacement",
    "spechub",
    "traversal_verification",
)
SCHEME_NAMES = ("iid", "without_replacement", "spechub")
ANY_TREE_METHODS = ("sps", "rrs", "kseq", "traversal_verification")  # verify every K x L tree
CONFLICTING = ("--scheme", "--branching", "--compare")  # valid alone, refused with some methods
# flag -> values it refuses (each case plants at most one)
INVALID: dict[str, tuple[str, ...]] = {
    "--vocab": ("0", "-3", "x", "1e9", "100000", "1000000000"),
    "--depth": ("0", "-1", "1e9", "x", "1000000000"),
    "--paths": ("0", "-2", "1e9", "two", "1000000000"),
    "--branching": ("0", "2,-1", "1e9", "a", "1000000,1000000"),
    "--temperature": ("-1", "nan", "inf", "x"),
    "--distance": ("-0.1", "2", "nan", "x"),
    "--top-k": ("0", "-1", "x"),
    "--max-new-tokens": ("0", "-5", "x"),
    "--seed": ("-1", "x"),
    "--method": ("nope", "ar"),
    "--scheme": ("nope",),
    "--rounds": ("0",),
    "--compare": ("nope", "sps,nope"),
    "--prompt": ("a,b", "99999"),
    "--threads": ("0",),
}
# flags refused for the model they are given with: (model, flag, value)
NOT_FOR_MODEL = (
    ("smollm2", "--vocab", "10"),
    ("smollm2", "--distance", "0.5"),
    ("toy", "--precision", "bfloat16"),
    ("toy", "--draft", "skip4"),
    ("toy", "--out", "somewhere"),
)


def decode_cli_case(rng: np.random.Generator, index: int) -> dict[str, Any]:
    """One decode command line: valid random flags and, 70% of the time, one planted
    invalid flag (first on the line when it is a value error, so argparse meets it first)."""
    method = str(rng.choice(DECODE_METHODS))
    valid: list[str] = ["--method", method]
    if rng.random() < 0.5:
        valid += ["--paths", str(int(rng.integers(1, 4)))]
    if rng.random() < 0.5:
        valid += ["--depth", str(int(rng.integers(1, 4)))]
    if rng.random() < 0.2:
        valid += ["--branching", ",".join(str(int(b)) for b in rng.integers(1, 3, size=2))]
    if rng.random() < 0.3:
        valid += ["--scheme", str(rng.choice(SCHEME_NAMES))]
    if rng.random() < 0.3:
        valid += ["--top-k", str(int(rng.integers(1, 12)))]
    if rng.random() < 0.4:
        valid += ["--temperature", str(rng.choice(["0", "1e-39", "0.5", "1", "2"]))]
    if rng.random() < 0.4:
        valid += ["--vocab", str(int(rng.integers(2, 40)))]
    if rng.random() < 0.3:
        valid += ["--distance", str(float(rng.choice([0.0, 0.3, 1.0])))]
    if rng.random() < 0.2:
        valid += ["--compare", ",".join(rng.choice(DECODE_METHODS, size=2, replace=False))]
    if rng.random() < 0.3:
        valid += ["--seed", str(int(rng.integers(0, 1000)))]
    model, planted, bad = "toy", None, []
    draw = rng.random()
    if draw < 0.55:
        planted = str(rng.choice(list(INVALID)))
        bad = [planted, str(rng.choice(INVALID[planted]))]
    elif draw < 0.7:
        model, planted, value = NOT_FOR_MODEL[int(rng.integers(len(NOT_FOR_MODEL)))]
        bad = [planted, value]
        valid = ["--method", str(rng.choice(ANY_TREE_METHODS))]  # nothing refused first
    if planted is not None:
        # only flags that cannot be refused first: a method that verifies every K x L tree
        # and i.i.d. drafts, no scheme, branching or compare; and no later value of the
        # planted flag (it would replace the planted one)
        pairs = [valid[i : i + 2] for i in range(0, len(valid), 2)]
        method = str(rng.choice(ANY_TREE_METHODS))
        pairs = [["--method", method] if pair[0] == "--method" else pair for pair in pairs]
        valid = [item for pair in pairs if pair[0] not in (planted, *CONFLICTING) for item in pair]
    tokens = int(rng.integers(1, 5))
    base = ["--model", model, "--prompt", "1,2", "--max-new-tokens", str(tokens), "--json"]
    return {
        "kind": "decode_cli",
        "index": index,
        "class": "decode_cli",
        "argv": ["decode", *bad, *base, "--no-progress", *valid],
        "planted": planted,
    }


def _no_model_load(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("otlp decode loaded a model")


def check_decode_cli(case: dict[str, Any]) -> list[str]:
    """Exit 0, or exit 2 with one stderr line naming a flag (the planted one where there is
    one) within :data:`REFUSAL_S`; never exit 1, never a model load."""
    argv = list(case["argv"])
    with mock.patch("otlp.commands.decode._load_pair", _no_model_load):
        code, _, err, seconds = run_cli(argv)
    shown = "otlp " + " ".join(argv)
    lines = err.strip().splitlines()
    planted = case["planted"]
    if "loaded a model" in err:
        return [f"`{shown}`: loaded a model before refusing"]
    if code == 0:
        return [f"`{shown}`: accepted the invalid {planted}"] if planted else []
    if code != 2:
        return [f"`{shown}`: exit {code}: {err.strip()[:300]}"]
    if len(lines) != 1:
        return [f"`{shown}`: {len(lines)} stderr lines, expected one: {err.strip()[:300]}"]
    if planted is not None and planted not in lines[0]:
        return [f"`{shown}`: the refusal does not name {planted}: {lines[0]}"]
    if planted is None and "--" not in lines[0]:
        return [f"`{shown}`: the refusal names no flag: {lines[0]}"]
    if seconds > REFUSAL_S:
        return [f"`{shown}`: refused after {seconds:.1f} s"]
    return []


def warm_up_decode_cli() -> None:
    """One toy decode per method (one token), compiling the tree kernels the cases use."""
    for method in DECODE_METHODS:
        run_cli(
            [
                "decode",
                "--model",
                "toy",
                "--prompt",
                "1",
                "--max-new-tokens",
                "1",
                "--json",
                "--no-progress",
                "--method",
                method,
            ]
        )


def decode_cli_components(case: dict[str, Any]) -> list[str]:
    """``cli:decode`` for a decode command-line case."""
    return ["cli:decode"]
