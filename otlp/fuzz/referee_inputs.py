"""Fuzz cases and checks for the referee's inputs: :func:`otlp.referee.referee`,
:func:`otlp.referee.replay` and ``otlp referee``.

A ``"referee"`` case names one *variant* of :data:`VARIANTS` (and a seed for its small
choices). Each variant is a call that must end one way:

* ``refused:ARG`` — a ``ValueError`` or ``TypeError`` whose message starts with ``ARG`` (the
  argument, reproducer field or flag the caller got wrong), from the API; from the command
  line exit status 2 and exactly one stderr line naming ``ARG``;
* ``error`` — a sampler that hangs, raises or breaks its protocol is an ``error`` verdict
  (exit 3), never a deviation, a traceback or a hang;
* ``lossless`` — a sampler that draws from the target on tiny settings passes (exit 0).

Every call runs with ``call_limit`` = :data:`CALL_LIMIT` and tiny budgets (one or two cases,
a large epsilon), and a refusal must come within :data:`REFUSAL_S` seconds.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

CALL_LIMIT = 0.2  # seconds a sampler call may take in these checks
REFUSAL_S = 3.0  # a refused input must be refused within this (no search, no model load)
VERDICT_S = 10.0  # a verdict on one or two tiny cases must come within this
MODULE = "otlp.fuzz.referee_inputs"


# ----- samplers (module level: the command line imports them by name) -----------------------
def lossless_sampler(p: np.ndarray, q: np.ndarray, drafts: Any, rng: Any) -> int:
    """Draws from the target, ignoring the drafts: lossless."""
    return int(rng.choice(p.shape[0], p=p))


def hanging_sampler(p: np.ndarray, q: np.ndarray, drafts: Any, rng: Any) -> int:
    """Never returns on its own (sleeps in short steps, so the referee's alarm can stop it)."""
    while True:
        time.sleep(0.01)


def raising_sampler(p: np.ndarray, q: np.ndarray, drafts: Any, rng: Any) -> int:
    """Raises on every call."""
    raise RuntimeError("the sampler failed")


def nan_sampler(p: np.ndarray, q: np.ndarray, drafts: Any, rng: Any) -> float:
    """Returns NaN instead of a token id."""
    return float("nan")


def out_of_range_sampler(p: np.ndarray, q: np.ndarray, drafts: Any, rng: Any) -> int:
    """Returns the id V (one past the vocabulary)."""
    return int(p.shape[0])


def text_sampler(p: np.ndarray, q: np.ndarray, drafts: Any, rng: Any) -> str:
    """Returns a string instead of a token id."""
    return "a"


def none_sampler(p: np.ndarray, q: np.ndarray, drafts: Any, rng: Any) -> None:
    """Returns nothing."""


BROKEN = {
    "hang": hanging_sampler,
    "raise": raising_sampler,
    "nan": nan_sampler,
    "out_of_range": out_of_range_sampler,
    "text": text_sampler,
    "none": none_sampler,
}

# ----- API variants: referee(lossless_sampler, **small, ARG=value) must refuse naming ARG -----
SMALL: dict[str, Any] = {"cases": 1, "epsilon": 0.3, "screen_samples": 50, "confirm": 1}
BAD_ARGUMENTS: dict[str, tuple[Any, ...]] = {
    "cases": (0, -1, 2.5, "3", None, [], True, [object()]),
    "seed": (-1, 2.5, "0", None, True),
    "epsilon": (0.0, -0.1, 0.9, math.nan, "0.1", None),
    "false_alarm": (0.0, 0.5, math.nan, "x"),
    "miss": (0.0, 1.0, math.nan),
    "protocol": ("nope", 3),
    "scheme": ("bogus",),
    "mode": ("fast",),
    "max_n": (0, -1, 2.5),
    "max_children": (0, "2"),
    "smollm2": (-1, 2.5),
    "shapes": (["nope"],),
    "screen_samples": (0, 2.5),
    "confirm": (0,),
    "call_limit": (0.0, -1.0, math.nan, "1"),
}
BAD_SAMPLERS = (None, 3, "otlp.fuzz.referee_inputs:lossless_sampler")

# ----- reproducer variants: replay(file) must refuse naming the field -------------------------
GOOD_CASE = {"protocol": "position", "p": [0.5, 0.5], "q": [0.2, 0.8], "n": 2, "scheme": "iid"}


def _reproducer(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "otlp_referee_reproducer": 1,
        "sampler": f"{MODULE}:lossless_sampler",
        "protocol": "position",
        "scheme": "iid",
        "epsilon": 0.3,
        "false_alarm": 1e-6,
        "miss": 1e-3,
        "finding": {"case": dict(GOOD_CASE)},
    }
    for key, value in changes.items():
        if key.startswith("case."):
            data["finding"]["case"][key.removeprefix("case.")] = value
        elif value is None:
            data.pop(key)
        else:
            data[key] = value
    return data


# name -> (file text, the field the refusal must name)
BAD_REPRODUCERS: dict[str, tuple[str, str]] = {
    "not_json": ("{not json", "replay"),
    "a_list": ("[1, 2]", "replay"),
    "no_finding": (json.dumps(_reproducer(finding=None)), "finding"),
    "case_not_object": (json.dumps(_reproducer(finding={"case": "x"})), "finding.case"),
    "string_epsilon": (json.dumps(_reproducer(epsilon="0.01")), "epsilon"),
    "p_not_a_law": (json.dumps(_reproducer(**{"case.p": [0.7, 0.7]})), "p"),
    "q_negative": (json.dumps(_reproducer(**{"case.q": [-0.2, 1.2]})), "q"),
    "zero_drafts": (json.dumps(_reproducer(**{"case.n": 0})), "n"),
    "no_such_sampler": (json.dumps(_reproducer(sampler="no_such_module_x:f")), "sampler"),
    "protocol_mismatch": (json.dumps(_reproducer(protocol="tree")), "replay"),
}

# ----- command-line variants: (argv after `referee`, the flag the one line must name) --------
GOOD_CLI = [f"{MODULE}:lossless_sampler", "--cases", "1", "--epsilon", "0.3"]
BAD_FLAGS: dict[str, tuple[list[str], str]] = {
    "cases_0": (["--cases", "0"], "cases"),
    "cases_text": (["--cases", "x"], "cases"),
    "cases_float": (["--cases", "2.5"], "cases"),
    "seed_negative": (["--seed", "-1"], "seed"),
    "max_n_0": (["--max-n", "0"], "max-n"),
    "smollm2_negative": (["--smollm2", "-1"], "smollm2"),
    "epsilon_nan": (["--epsilon", "nan"], "epsilon"),
    "epsilon_big": (["--epsilon", "2"], "epsilon"),
    "epsilon_text": (["--epsilon", "x"], "epsilon"),
    "false_alarm_0": (["--false-alarm", "0"], "false"),
    "miss_text": (["--miss", "x"], "miss"),
    "call_limit_0": (["--call-limit", "0"], "call-limit"),
    "call_limit_negative": (["--call-limit", "-1"], "call-limit"),
    "call_limit_inf": (["--call-limit", "inf"], "call-limit"),
    "protocol": (["--protocol", "nope"], "protocol"),
    "scheme": (["--scheme", "bogus"], "scheme"),
    "mode": (["--mode", "fast"], "mode"),
    "shapes": (["--protocol", "tree", "--shapes", "nope"], "shapes"),
    "unknown_flag": (["--cases-count", "1"], "--cases-count"),
}
BAD_SAMPLER_NAMES = {
    "no_sampler": ([], "MODULE:FUNCTION"),
    "no_colon": (["otlp"], "sampler"),
    "no_module": (["no_such_module_x:f"], "sampler"),
    "no_attribute": ([f"{MODULE}:nothing_here"], "sampler"),
    "not_callable": ([f"{MODULE}:CALL_LIMIT"], "sampler"),
}

VARIANT_KINDS = (
    "api_argument",
    "api_sampler",
    "broken",
    "lossless",
    "replay",
    "cli_flag",
    "cli_sampler",
    "cli_replay",
    "cli_broken",
)


def referee_case(rng: np.random.Generator, index: int) -> dict[str, Any]:
    """One referee-input case: a variant kind, the variant and its small choices."""
    kind = str(rng.choice(VARIANT_KINDS))
    case: dict[str, Any] = {
        "kind": "referee",
        "index": index,
        "class": "referee",
        "variant": kind,
        "seed": int(rng.integers(2**31)),
    }
    if kind == "api_argument":
        arg = str(rng.choice(list(BAD_ARGUMENTS)))
        case |= {"argument": arg, "choice": int(rng.integers(len(BAD_ARGUMENTS[arg])))}
    elif kind == "api_sampler":
        case["choice"] = int(rng.integers(len(BAD_SAMPLERS)))
    elif kind in ("broken", "cli_broken"):
        case |= {
            "sampler": str(rng.choice(list(BROKEN))),
            "protocol_scheme": str(rng.choice(["iid", "without_replacement"])),
        }
    elif kind in ("replay", "cli_replay"):
        case["reproducer"] = str(rng.choice(list(BAD_REPRODUCERS)))
    elif kind == "cli_flag":
        case["flag"] = str(rng.choice(list(BAD_FLAGS)))
    elif kind == "cli_sampler":
        case["sampler_name"] = str(rng.choice(list(BAD_SAMPLER_NAMES)))
    return case


def referee_components(case: dict[str, Any]) -> list[str]:
    """``referee:api``, ``referee:replay`` or ``referee:cli``."""
    kind = case["variant"]
    if kind.startswith("cli"):
        return ["referee:cli"]
    return ["referee:replay" if kind == "replay" else "referee:api"]


def referee_component_names() -> list[str]:
    """Every component a referee case can produce."""
    return ["referee:api", "referee:replay", "referee:cli"]


def _refusal_problems(call: Callable[[], Any], name: str, what: str) -> list[str]:
    """``call()`` must raise ValueError/TypeError whose message starts with (or, for a
    reproducer, names) ``name``, within :data:`REFUSAL_S`."""
    start = time.perf_counter()
    try:
        result = call()
    except (ValueError, TypeError) as exc:
        seconds = time.perf_counter() - start
        message = str(exc)
        if name not in message:
            return [f"{what}: refused without naming {name!r}: {type(exc).__name__}: {message}"]
        if seconds > REFUSAL_S:
            return [f"{what}: refused after {seconds:.1f} s"]
        return []
    status = getattr(result, "status", result)
    return [f"{what}: not refused (returned {status!r})"]


def _api_argument(case: dict[str, Any]) -> list[str]:
    from otlp.referee import referee

    arg = case["argument"]
    value = BAD_ARGUMENTS[arg][case["choice"]]
    options = SMALL | {"call_limit": CALL_LIMIT, arg: value}
    if arg == "scheme" or arg == "shapes":
        options["protocol"] = "tree" if arg == "shapes" else "position"
    return _refusal_problems(
        lambda: referee(lossless_sampler, **options), arg, f"referee({arg}={value!r})"
    )


def _api_sampler(case: dict[str, Any]) -> list[str]:
    from otlp.referee import referee

    value: Any = BAD_SAMPLERS[case["choice"]]
    return _refusal_problems(
        lambda: referee(value, **SMALL, call_limit=CALL_LIMIT), "sampler", f"referee({value!r})"
    )


def _verdict_problems(call: Callable[[], Any], want: str, what: str) -> list[str]:
    """``call()`` must return a verdict of status ``want`` within :data:`VERDICT_S`."""
    start = time.perf_counter()
    verdict = call()
    seconds = time.perf_counter() - start
    problems = []
    if verdict.status != want:
        problems.append(f"{what}: verdict {verdict.status!r}, expected {want!r}")
    if seconds > VERDICT_S:
        problems.append(f"{what}: verdict after {seconds:.1f} s")
    return problems


def _broken(case: dict[str, Any]) -> list[str]:
    from otlp.referee import referee

    sampler = BROKEN[case["sampler"]]
    options = SMALL | {"cases": 2, "seed": case["seed"] % 1000, "call_limit": CALL_LIMIT}
    return _verdict_problems(
        lambda: referee(sampler, scheme=case["protocol_scheme"], **options),
        "error",
        f"referee({case['sampler']} sampler)",
    )


def _lossless(case: dict[str, Any]) -> list[str]:
    from otlp.referee import referee

    options = SMALL | {"cases": 2, "seed": case["seed"] % 1000, "call_limit": 5.0}
    return _verdict_problems(
        lambda: referee(lossless_sampler, **options), "lossless", "referee(lossless sampler)"
    )


def _replay(case: dict[str, Any]) -> list[str]:
    from otlp.referee import replay

    text, field = BAD_REPRODUCERS[case["reproducer"]]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "reproducer.json"
        path.write_text(text)
        return _refusal_problems(
            lambda: replay(path, call_limit=CALL_LIMIT), field, f"replay({case['reproducer']})"
        )


def run_cli(argv: list[str]) -> tuple[int, str, str, float]:
    """``otlp ARGV`` in this process: exit status, stdout, stderr and seconds. What ``main``
    changes for a process of its own is put back: its SIGTERM handler (left in a fuzz worker
    it turned the pool's terminate into a KeyboardInterrupt the worker survived, and the
    campaign waited for it forever) and the ``otlp`` logger's handlers and level."""
    from otlp.cli import main

    log = logging.getLogger("otlp")
    handlers, level, propagate = list(log.handlers), log.level, log.propagate
    on_term = signal.getsignal(signal.SIGTERM) if _main_thread() else None
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    finally:
        if on_term is not None:
            signal.signal(signal.SIGTERM, on_term)
        log.handlers[:] = handlers
        log.setLevel(level)
        log.propagate = propagate
    return code, out.getvalue(), err.getvalue(), time.perf_counter() - start


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def cli_refusal_problems(argv: list[str], name: str) -> list[str]:
    """``otlp ARGV`` must exit 2 within :data:`REFUSAL_S` with exactly one stderr line that
    names ``name``."""
    code, _, err, seconds = run_cli(argv)
    lines = err.strip().splitlines()
    shown = " ".join(argv)
    if code != 2:
        return [f"`otlp {shown}`: exit {code}, expected 2 ({err.strip()[:200]!r})"]
    if len(lines) != 1:
        return [f"`otlp {shown}`: {len(lines)} stderr lines, expected one"]
    if name not in lines[0]:
        return [f"`otlp {shown}`: the line does not name {name!r}: {lines[0]}"]
    if seconds > REFUSAL_S:
        return [f"`otlp {shown}`: refused after {seconds:.1f} s"]
    return []


def _cli_flag(case: dict[str, Any]) -> list[str]:
    argv, name = BAD_FLAGS[case["flag"]]
    return cli_refusal_problems(
        ["referee", *GOOD_CLI, "--call-limit", str(CALL_LIMIT), *argv], name
    )


def _cli_sampler(case: dict[str, Any]) -> list[str]:
    argv, name = BAD_SAMPLER_NAMES[case["sampler_name"]]
    return cli_refusal_problems(["referee", *argv, "--cases", "1"], name)


def _cli_replay(case: dict[str, Any]) -> list[str]:
    text, field = BAD_REPRODUCERS[case["reproducer"]]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "reproducer.json"
        path.write_text(text)
        return cli_refusal_problems(["referee", "--replay", str(path)], field)


def _cli_broken(case: dict[str, Any]) -> list[str]:
    argv = [
        "referee",
        f"{MODULE}:{BROKEN[case['sampler']].__name__}",
        "--cases",
        "2",
        "--epsilon",
        "0.3",
        "--call-limit",
        str(CALL_LIMIT),
        "--scheme",
        case["protocol_scheme"],
        "--json",
    ]
    with tempfile.TemporaryDirectory() as folder:
        code, _, err, seconds = run_cli([*argv, "--out", str(Path(folder) / "r.json")])
    if code != 3:
        return [f"`otlp {' '.join(argv)}`: exit {code}, expected 3 ({err.strip()[:200]!r})"]
    if seconds > VERDICT_S:
        return [f"`otlp {' '.join(argv)}`: {seconds:.1f} s"]
    return []


CHECKS: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "api_argument": _api_argument,
    "api_sampler": _api_sampler,
    "broken": _broken,
    "lossless": _lossless,
    "replay": _replay,
    "cli_flag": _cli_flag,
    "cli_sampler": _cli_sampler,
    "cli_replay": _cli_replay,
    "cli_broken": _cli_broken,
}


def check_referee(case: dict[str, Any]) -> list[str]:
    """The outcome a referee-input case's variant must have (module notes)."""
    return CHECKS[case["variant"]](case)
