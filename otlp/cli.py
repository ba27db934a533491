"""The ``otlp`` command line. Each subcommand lives in a module of ``otlp.commands`` that
declares its help as ``COMMAND``, its flags in ``add_arguments(parser)`` and its ``run(args)``
(``otlp.commands.common.add_command`` reads them); add a module's name to ``COMMANDS`` to add a
subcommand.

Exit statuses: 0 success; 1 a check failed (a plan or cell did not verify, a fuzz instance
failed, a refereed sampler deviates); 2 bad input (one line naming the flag, never a
traceback); 3 a refereed sampler failed (``otlp referee``'s error verdict); 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
import threading

from otlp import __version__
from otlp.commands.common import HelpFormatter, Parser, add_command

# In the order a new user meets them: one instance, all rules, multi-step, the benchmark
# harness, the fuzz campaign, the instance suites.
COMMANDS = (
    "otlp.commands.solve",
    "otlp.commands.compare",
    "otlp.commands.multistep",
    "otlp.commands.decode",
    "otlp.commands.bench",
    "otlp.commands.fuzz",
    "otlp.commands.validate",
    "otlp.commands.suites",
    "otlp.commands.referee",
)

log = logging.getLogger("otlp")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="otlp",
        description="Optimal-transport LPs for multi-draft speculative sampling: build, solve, "
        "verify, benchmark.",
        epilog="example:\n  otlp solve --generator zipf --vocab 1000 --n 3 --top-k 12\n\n"
        "`otlp COMMAND --help` describes each command.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"otlp {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more log output (-vv: debug)"
    )
    parser.add_argument("-q", "--quiet", action="count", default=0, help="only errors")
    subparsers = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", title="commands"
    )
    for module in COMMANDS:
        add_command(subparsers, importlib.import_module(module))
    return parser


def configure_logging(verbose: int, quiet: int) -> None:
    """Log to stderr: warnings by default, -v info, -vv debug, -q errors only."""
    level = logging.WARNING - 10 * verbose + 10 * quiet
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("otlp: %(levelname)s: %(message)s"))
    log.handlers[:] = [handler]
    log.setLevel(max(logging.DEBUG, min(level, logging.CRITICAL)))
    log.propagate = False


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM stops a command like Ctrl-C: worker pools are shut down, finished work kept."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse: --help, --version (0) or a usage error (2)
        return int(exit_.code or 0)
    configure_logging(args.verbose, args.quiet)
    where = f"otlp {args.command}"
    try:
        return int(args.run(args) or 0)
    except ValueError as exc:  # bad input: one clear line, no traceback
        print(f"{where}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # stdout closed early (e.g. piped into head): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # a path that cannot be read or written
        name = f" {exc.filename}" if exc.filename else ""
        print(f"{where}: error:{name} {exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{where}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: one line, the traceback only with -v
        log.debug("traceback", exc_info=True)
        print(
            f"{where}: internal error: {type(exc).__name__}: {exc} (run with -vv for the "
            "traceback)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
