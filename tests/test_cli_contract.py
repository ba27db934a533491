"""The command line's error contract, for every flag of every command: a usage error (a value
of the wrong type, an unknown choice, an unknown flag, a missing value or argument) is one line
on stderr naming the flag, exit status 2 (issue 27). The cases are generated from the parsers
themselves, so a flag added later is covered without editing this file."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator

import pytest

from otlp.cli import build_parser, main
from otlp.commands.common import CommaList, positive_int_item
from tests.cli_errors import usage_error

# Values of the wrong type for a flag, by what the flag converts its value with.
WRONG = {
    int: ["abc", "1e3", "1.5", ""],
    float: ["abc", "1,5", ""],
    positive_int_item: ["x", "0", "2.5"],
}


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _value_flags(sub: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in sub._actions:
        if action.option_strings and not isinstance(
            action, argparse._HelpAction | argparse._VersionAction
        ):
            yield action


def _cases() -> Iterator[tuple[str, list[str], str]]:
    """(id, argv, the flag the error must name)."""
    for name, sub in _commands().items():
        for action in _value_flags(sub):
            flag = action.option_strings[-1]
            if action.nargs == 0:  # store_true / count: a value is refused
                yield f"{name} {flag}=x", [name, f"{flag}=x"], flag
                continue
            yield f"{name} {flag} (no value)", [name, flag], flag
            converter = action.item if isinstance(action, CommaList) else action.type
            values = list(WRONG.get(converter, []))  # type: ignore[call-overload]
            if action.choices is not None:
                values.append("nosuch")
            if isinstance(action, CommaList):
                values.append(",")  # an empty list
            for value in values:
                yield f"{name} {flag}={value!r}", [name, f"{flag}={value}"], flag
        yield f"{name} --nosuch", [name, "--nosuch"], "--nosuch"
        yield f"{name} stray", [name, "stray"], "stray"


CASES = list(_cases())
# The reproducers, by hand, besides the generated table.
REPORTED = [
    (["decode", "--paths", "abc"], "--paths"),
    (["solve", "--scheme", "nosuch"], "--scheme"),
    (["fuzz", "--cases", "1e3"], "--cases"),
    (["solve", "--tau", "0.1"], "--tau"),
    (["--tau", "solve"], "--tau"),
    (["nosuch"], "COMMAND"),
    ([], "COMMAND"),
]


def test_the_table_covers_every_command_and_typed_flag() -> None:
    commands = _commands()
    assert len(commands) >= 8
    for name, sub in commands.items():
        named = {flag for case_id, _, flag in CASES if case_id.startswith(f"{name} ")}
        for action in _value_flags(sub):
            assert action.option_strings[-1] in named, (name, action.option_strings)
    typed = [case for case in CASES if "'abc'" in case[0]]
    assert len(typed) >= 20  # every int and float flag of every command


@pytest.mark.parametrize(("argv", "flag"), [case[1:] for case in CASES], ids=[c[0] for c in CASES])
def test_every_usage_error_is_one_line_naming_the_flag(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture
) -> None:
    usage_error(argv, capsys, flag)


@pytest.mark.parametrize(("argv", "flag"), REPORTED, ids=[" ".join(a) or "-" for a, _ in REPORTED])
def test_reported_usage_errors(argv: list[str], flag: str, capsys: pytest.CaptureFixture) -> None:
    usage_error(argv, capsys, flag)


def test_an_unknown_flag_names_the_command_and_the_nearest_flag(
    capsys: pytest.CaptureFixture,
) -> None:
    assert main(["multistep", "--lenghts", "3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("otlp multistep: error: --lenghts: unknown flag (did you mean --lengths?")


@pytest.mark.parametrize(
    "argv",
    [
        ["solve", "--vocab", "1", "--json"],
        ["solve", "--vocab", "1", "--scheme", "greedy", "--json"],
        ["solve", "--vocab", "3", "--scheme", "without_replacement", "--json"],
    ],
    ids=" ".join,
)
def test_defaults_adapt_to_a_small_vocabulary(
    argv: list[str], capsys: pytest.CaptureFixture
) -> None:
    """The default top-k (20) and n (2) shrink to what the instance has: no flag the user did not
    type is refused."""
    assert main([*argv, "--methods", "maxflow"]) == 0
    result = json.loads(capsys.readouterr().out)
    vocab = int(argv[2])
    assert result["instance"]["top_k"] == vocab
    assert result["results"][0]["ok"]


def test_compare_adapts_n_to_a_small_vocabulary(capsys: pytest.CaptureFixture) -> None:
    argv = ["compare", "--vocab", "1", "--scheme", "without_replacement", "--rules", "sps"]
    assert main([*argv, "--json"]) == 0
    assert {r["n"] for r in json.loads(capsys.readouterr().out)["records"]} == {1}


def test_generated_independent_drafts_are_refused_naming_the_flag(
    capsys: pytest.CaptureFixture,
) -> None:
    usage_error(["solve", "--scheme", "independent"], capsys, "--scheme: independent drafts")
