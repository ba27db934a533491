"""Argument groups and helpers shared by subcommands: help layout, list flags, instance input,
output paths under ``otlp-results/``, JSON output, progress bars on stderr."""

from __future__ import annotations

import argparse
import difflib
import json
import math
import numbers
import shutil
import sys
import textwrap
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

import numpy as np
from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from otlp.args import canonical_name
from otlp.instance import SCHEMES, Instance
from otlp.instances.generators import GENERATORS

GENERATED_TOP_K = 20
RESULTS_ROOT = Path("otlp-results")  # git-ignored; every command's default output folder


# ----- parsing -------------------------------------------------------------------------------
class Parser(argparse.ArgumentParser):
    """argparse with the command line's error contract: every usage error (a value of the wrong
    type, an unknown choice, an unknown flag, a missing argument) is one line on stderr naming
    the flag, exit status 2, without argparse's usage block (``--help`` shows it).

    Subcommand parsers inherit the class (``add_subparsers`` builds them with it), so the
    contract holds for every command of ``otlp`` once the top-level parser uses it.
    """

    def error(self, message: str) -> NoReturn:
        """``argument --paths: invalid int value: 'abc'`` -> ``--paths: invalid int value:
        'abc'``, after ``PROG: error:``."""
        prefix = "argument "
        if message.startswith(prefix) and ": " in message:
            message = message.removeprefix(prefix)
        if "arguments are required: COMMAND" in message:
            message += f" (`{self.prog} --help` lists the commands)"
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Every parser refuses what it does not know itself, so the error names the command
        (a subcommand's unknown flags are no longer handed up to the top-level parser) and the
        nearest known flag."""
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(self._unknown(extras[0]))
        return parsed, extras

    def _unknown(self, given: str) -> str:
        if not given.startswith("-"):
            return f"{given}: unexpected argument (`{self.prog} --help` lists the arguments)"
        flag = given.split("=", 1)[0]
        known = [option for action in self._actions for option in action.option_strings]
        close = difflib.get_close_matches(flag, known, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        return f"{flag}: unknown flag ({hint}`{self.prog} --help` lists the flags)"


# ----- help ----------------------------------------------------------------------------------
class HelpFormatter(argparse.HelpFormatter):
    """Wraps description paragraphs, keeps indented lines (the epilog's example) as they are,
    and appends "(default: X)" to every option that takes a value and has a default."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        lines = []
        for line in text.splitlines():
            if line.startswith(" ") or not line:
                lines.append(indent + line)
            else:
                lines.append(
                    textwrap.fill(line, width, initial_indent=indent, subsequent_indent=indent)
                )
        return "\n".join(lines)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            "%(default)" in text
            or "default" in text
            or action.nargs == 0  # flags: store_true, store_false, count
            or default is None
            or default == argparse.SUPPRESS
            or default == []
            or not action.option_strings
        ):
            return text
        shown = ",".join(map(str, default)) if isinstance(default, list | tuple) else "%(default)s"
        return f"{text} (default: {shown})"


@dataclass(frozen=True)
class Command:
    """A subcommand's help: the one line ``otlp --help`` lists, the description and example of
    ``otlp NAME --help``, and what its ``--json`` flag prints."""

    summary: str
    description: str
    example: str
    json_help: str = "print machine-readable JSON to stdout instead of tables"


def add_command(subparsers: argparse._SubParsersAction, module: ModuleType) -> None:
    """The subcommand a module of ``otlp.commands`` declares: named after the module, with its
    ``COMMAND`` help, ``--json``, the flags its ``add_arguments(parser)`` adds (if it has any)
    and its ``run(args)``."""
    command: Command = module.COMMAND
    parser = subparsers.add_parser(
        module.__name__.rsplit(".", 1)[-1],
        help=command.summary,
        description=command.description,
        epilog=f"example:\n  {command.example}",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--json", action="store_true", help=command.json_help)
    if hasattr(module, "add_arguments"):
        module.add_arguments(parser)
    parser.set_defaults(run=module.run)


def add_progress_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress bar (it goes to stderr)"
    )


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mkdir",
        action="store_true",
        help=f"create missing parent folders of output paths outside the working directory "
        f"(inside it, and under {RESULTS_ROOT}/, they are always created)",
    )


# ----- lists: comma-separated, repeatable ----------------------------------------------------
class CommaList(argparse.Action):
    """``--flag a,b --flag c`` -> ``[a, b, c]``: comma-separated and repeatable, the same for
    every list flag. The first use replaces the default. ``item`` converts each element."""

    def __init__(self, *args: Any, item: Callable[[str], Any] = str, **kwargs: Any) -> None:
        self.item = item
        super().__init__(*args, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        parts = [part.strip() for part in str(values).split(",") if part.strip()]
        if not parts:
            raise argparse.ArgumentError(self, "empty list (expected comma-separated values)")
        converted = []
        for part in parts:
            try:
                converted.append(self.item(part))
            except ValueError as exc:
                raise argparse.ArgumentError(self, f"{part!r}: {exc}") from None
        current = getattr(namespace, self.dest, None)
        if current is self.default or current is None:
            current = []
        setattr(namespace, self.dest, [*current, *converted])


def positive_int_item(text: str) -> int:
    """A list element that must be a positive integer."""
    try:
        value = int(text)
    except ValueError:
        raise ValueError("expected a positive integer") from None
    if value < 1:
        raise ValueError("expected a positive integer")
    return value


def flag_type(check: Callable[[str], Any], what: str) -> Callable[[str], Any]:
    """An argparse ``type=`` from a checker that raises ``ValueError``: the flag is refused at
    parse time (a usage error naming it, before any work) with the checker's message, less the
    argument name it starts with. ``what`` names the expected value in argparse's messages."""

    def convert(text: str) -> Any:
        try:
            return check(text)
        except ValueError as exc:
            message = str(exc)
            head, sep, tail = message.partition(": ")
            raise argparse.ArgumentTypeError(tail if sep and " " not in head else message) from None

    convert.__name__ = what
    return convert


def int_at_least(minimum: int) -> Callable[[str], int]:
    """A checker for integers >= ``minimum`` given as text (for :func:`flag_type`)."""

    def check(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise ValueError(f"expected an integer >= {minimum}, got {value}")
        return value

    return check


def name_item(text: str) -> str:
    """A list element naming a method, rule or scheme, in canonical snake_case."""
    return canonical_name(text)


def check_names(flag: str, chosen: Iterable[str], known: Sequence[str]) -> list[str]:
    """``chosen`` in canonical spelling, or a ``ValueError`` naming ``flag`` and the choices."""
    names = [canonical_name(name, flag) for name in chosen]
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"{flag}: unknown {', '.join(unknown)}; choose from {', '.join(known)}")
    return list(dict.fromkeys(names))


# ----- instances -----------------------------------------------------------------------------
def add_instance_arguments(parser: argparse.ArgumentParser) -> None:
    """--instance FILE, or --generator with its options; plus n, top-k and scheme."""
    source = parser.add_argument_group("instance")
    source.add_argument(
        "--instance",
        type=Path,
        metavar="FILE",
        help=".npz or .json file with arrays p and q (q may be n rows for 'independent'); "
        "may also hold n, scheme, top_k",
    )
    source.add_argument(
        "--generator", choices=sorted(GENERATORS), default="zipf", help="instance generator"
    )
    source.add_argument("--vocab", type=int, default=1000, help="vocabulary size V")
    source.add_argument("--seed", type=int, default=0, help="generator seed")
    source.add_argument("--temperature", type=float, default=1.0, help="generator temperature")
    source.add_argument("--similarity", type=float, default=0.7, help="zipf / spechub-toy")
    source.add_argument(
        "--n",
        type=int,
        default=None,
        help="number of drafts (default: the file's, or 2; 'independent': q's rows; without "
        "replacement: at most the tokens of positive draft probability)",
    )
    source.add_argument(
        "--top-k",
        type=int,
        default=None,
        help=f"draft top-k (default: the file's, or {GENERATED_TOP_K} for generated instances, at "
        "most --vocab)",
    )
    source.add_argument(
        "--scheme",
        type=canonical_name,
        choices=SCHEMES,
        default=None,
        help="draft scheme (default: the file's, or iid)",
    )
    source.add_argument("--renormalize", action="store_true", help="rescale p and q to sum 1")


def instance_from_args(args: argparse.Namespace) -> Instance:
    """Build the instance the arguments describe; errors are ValueErrors naming the input."""
    stored: dict[str, Any] = {}
    if args.instance is not None:
        stored = read_instance_file(args.instance)
        p, q = stored["p"], stored["q"]
    else:
        if args.vocab < 1:
            raise ValueError(f"--vocab: expected a positive integer, got {args.vocab}")
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
    scheme = args.scheme or stored.get("scheme", "iid")
    if scheme == "independent" and args.instance is None:
        raise ValueError(
            "--scheme: independent drafts need one q row per draft, which the generators do not "
            "make; pass an --instance file whose q has n rows"
        )
    default_top_k = stored.get("top_k") if args.instance is not None else generated_top_k(p)
    top_k = args.top_k if args.top_k is not None else default_top_k
    n = args.n if args.n is not None else stored.get("n")
    n = default_n(q, scheme, top_k) if n is None else n
    try:
        return Instance(p, q, n, scheme, top_k, renormalize=args.renormalize)
    except ValueError as exc:
        flag = str(exc).split(":", 1)[0]
        flags = {"n": "--n", "top_k": "--top-k", "scheme": "--scheme"}
        if flag in flags:  # name the flag the user typed (or the file key it came from)
            source = flags[flag] if args.instance is None else f"{flags[flag]} / {args.instance}"
            raise ValueError(f"{source}: {str(exc).split(':', 1)[1].strip()}") from None
        raise


def generated_top_k(p: Any) -> int:
    """The top-k of a generated instance when none is given: :data:`GENERATED_TOP_K`, or the
    whole vocabulary when it is smaller."""
    return min(GENERATED_TOP_K, len(p))


def default_n(q: Any, scheme: str, top_k: int | None) -> int:
    """The number of drafts when none is given: 2, except that independent drafts have one q
    row each and drafts without replacement (or greedy) cannot outnumber the draft tokens."""
    try:
        rows = np.atleast_2d(np.asarray(q, dtype=np.float64))
    except (TypeError, ValueError):
        return 2  # not a matrix of numbers: the instance refuses q, naming it
    if scheme == "independent":
        return len(rows)
    if scheme in ("without_replacement", "greedy"):
        positive = int(np.count_nonzero(rows[0] > 0))
        return max(1, min(2, positive, top_k or positive))
    return 2


def read_instance_file(path: Path) -> dict[str, Any]:
    """Read p, q (and optional n, scheme, top_k) from a .npz or .json file; every problem is a
    ``ValueError`` naming ``--instance``."""
    if not path.exists():
        raise ValueError(f"--instance: no such file {path}")
    if not path.is_file():
        raise ValueError(f"--instance: {path} is not a file")
    if path.suffix == ".npz":
        stored = _read_npz(path)
    elif path.suffix == ".json":
        try:
            stored = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"--instance: {path} is not valid JSON ({exc})") from None
        if not isinstance(stored, dict):
            raise ValueError(
                f"--instance: {path} must hold a JSON object with keys p and q, "
                f"got {type(stored).__name__}"
            )
    else:
        raise ValueError(f"--instance: expected a .npz or .json file, got {path.suffix!r}")
    missing = {"p", "q"} - set(stored)
    if missing:
        raise ValueError(f"--instance: {path} lacks {', '.join(sorted(missing))}")
    for key in ("n", "top_k"):
        if key in stored:
            stored[key] = _stored_int(path, key, stored[key])
    if "scheme" in stored:
        scheme = stored["scheme"]
        scheme = scheme.item() if isinstance(scheme, np.ndarray) and scheme.ndim == 0 else scheme
        if not isinstance(scheme, str):
            raise ValueError(f"--instance: {path}: scheme must be a string, got {scheme!r}")
        stored["scheme"] = scheme
    return stored


def _read_npz(path: Path) -> dict[str, object]:
    try:
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as exc:
        raise ValueError(f"--instance: cannot read {path} as .npz ({exc})") from None


def _stored_int(path: Path, key: str, value: object) -> int | None:
    """An integer stored in an instance file: a scalar with an integral value, never truncated;
    ``top_k`` may be null."""
    if isinstance(value, np.ndarray):
        if value.ndim != 0:
            raise ValueError(f"--instance: {path}: {key} must be one integer, got {value.tolist()}")
        value = value.item()
    if value is None and key == "top_k":
        return None
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    raise ValueError(f"--instance: {path}: {key} must be an integer, got {value!r}")


# ----- outputs -------------------------------------------------------------------------------
def output_path(flag: str, path: Path, *, folder: bool, mkdir: bool) -> Path:
    """Check an output path before any work: a folder (``folder``) or a file to write.

    Refuses a file where a folder is wanted and vice versa; missing parent folders are created
    only inside the working directory (and so under ``otlp-results/``), elsewhere only with
    ``--mkdir``.
    """
    if folder and path.exists() and not path.is_dir():
        raise ValueError(f"{flag}: {path} exists and is not a folder")
    if not folder and path.is_dir():
        raise ValueError(f"{flag}: {path} is a folder; give a file name")
    parent = path if folder else path.parent
    missing = [p for p in (parent, *parent.parents) if not p.exists()]
    if missing:
        top = missing[-1]
        inside = top.resolve().is_relative_to(Path.cwd().resolve())
        if not inside and not mkdir and (not folder or len(missing) > 1):
            raise ValueError(
                f"{flag}: folder {top} does not exist; create it or pass --mkdir to create it"
            )
        parent.mkdir(parents=True, exist_ok=True)
    return path


def print_json(data: Any) -> None:
    """One JSON document on stdout (NaN and inf written as null)."""
    print(json.dumps(_json_safe(data), default=str))


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.generic):
        return _json_safe(value.item())
    return value


def console() -> Console:
    """A rich console at least 120 columns wide, so tables are not squeezed when piped."""
    return Console(width=max(120, shutil.get_terminal_size((120, 24)).columns))


def stderr_console() -> Console:
    """Progress, notes and summaries: stderr, so that stdout stays machine-readable."""
    return Console(stderr=True)


# ----- progress ------------------------------------------------------------------------------
class Tracker:
    """A progress bar over units of work with an ETA from the work done so far.

    ``advance(work, units)`` adds finished work (any unit, e.g. estimated cost) and counted
    items (e.g. cells); the ETA divides the remaining work by the rate measured so far.
    """

    def __init__(self, bar: Progress | None, task: TaskID | None) -> None:
        self._bar, self._task = bar, task

    def advance(self, work: float = 1.0, items: int = 1, description: str | None = None) -> None:
        if self._bar is None or self._task is None:
            return
        task = self._bar.tasks[self._task]
        fields = {"done": task.fields.get("done", 0) + items}
        if description is not None:
            fields["description"] = description
        self._bar.update(self._task, advance=work, **fields)


@contextmanager
def progress(
    label: str, total_work: float, total_items: int, what: str, *, enabled: bool
) -> Iterator[Tracker]:
    """A :class:`Tracker` drawing "label ━━━ 42% 12/30 cells 0:00:10 eta 0:00:14" on stderr."""
    if not enabled or total_items == 0:
        yield Tracker(None, None)
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[done]}/" + f"{total_items} {what}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=stderr_console(), transient=False) as bar:
        task = bar.add_task(label, total=max(total_work, 1e-12), done=0)
        yield Tracker(bar, task)


def progress_enabled(args: argparse.Namespace) -> bool:
    """Progress is drawn unless --no-progress, or stderr is not a terminal and -q was given."""
    return not getattr(args, "no_progress", False) and not getattr(args, "quiet", 0)


def stderr_note(text: str) -> None:
    print(text, file=sys.stderr)
