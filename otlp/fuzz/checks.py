"""What the fuzz harness checks on each case, per component.

Components are ``method:NAME`` (every :func:`otlp.method_names` method), ``rule:NAME`` (every
:func:`otlp.rules.names` rule), ``scheme:NAME`` (the draft scheme itself: column masses,
sampled drafts, alpha*), ``decode:METHOD`` (:func:`otlp.verify_drafts` for the case's
scheme, p and q in the case's ``decoder_dtypes``, numpy or torch) and ``multistep:METHOD``
(``spectr:RULE`` for traversal).

Each check returns an :class:`Outcome`: ``ok``; ``refused`` (a ``ValueError`` — a clear
refusal such as a size guard or a rule that does not apply is correct behaviour); or
``failed`` with a message (a wrong answer, or any other exception). Every conditional a
decoder would sample from is scanned: entries >= -tol, sum 1 within tol, and sampled tokens
are valid tokens with positive probability.
"""

from __future__ import annotations

import contextlib
import math
import re
import resource
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.util import find_spec
from typing import Any

import numpy as np

from otlp import rules
from otlp.api import solve
from otlp.errors import ProblemTooLarge
from otlp.fuzz.decode_cli import check_decode_cli, decode_cli_components, warm_up_decode_cli
from otlp.fuzz.engine_layouts import (
    check_engine,
    engine_component_names,
    engine_components,
    warm_up_engine,
)
from otlp.fuzz.referee_inputs import check_referee, referee_component_names, referee_components
from otlp.instance import SCHEMES, Instance
from otlp.methods import method_names
from otlp.multistep.exact import output_distribution, output_law, target_distribution
from otlp.multistep.models import model_pair
from otlp.rules.mentored import MentoredDecoding
from otlp.solvers.global_resolution.budget import compile_seconds
from otlp.subset import optimal_acceptance
from otlp.tensors import as_float64
from otlp.verification.position import METHODS as DECODE_METHODS
from otlp.verification.position import verify_drafts
from otlp.verification.position_schemes import SCHEME_METHODS
from otlp.verify import verify

SLICE_TOL = 1e-9  # per-conditional sign and sum tolerance (exact methods and rules)
LOOSE_TOL = {"cvxpy": 1e-6, "global_resolution": 1e-6}  # interior point; tau-certified
LOSSLESS_TOL = 1e-9  # L1(output, p) of a lossless rule; multi-step target matching
SAMPLES = 16
SLOW_S = 5.0  # a single check slower than this (numba's compiling excluded) is a failure
TIMEOUT_S = 30  # a check still running after this is stopped and counted as a failure
JOINT_ROWS = 20_000  # a rule's exact joint is scanned row by row up to this many draft columns
MULTISTEP_METHODS = ("token", "block", "gbv", "spectr")
TAU_METHODS = ("global_resolution",)  # methods that take the case's tau


# Issue 39's surfaces: case kind -> (its components, its check)
SURFACES: dict[str, tuple[Callable[[dict[str, Any]], list[str]], Callable[..., list[str]]]] = {
    "engine": (engine_components, check_engine),
    "referee": (referee_components, check_referee),
    "decode_cli": (decode_cli_components, check_decode_cli),
}


@dataclass(frozen=True)
class Outcome:
    component: str
    status: str  # "ok", "refused", "failed"
    message: str = ""
    seconds: float = 0.0


def _float_dtype(name: str) -> Any:
    """A numpy dtype by name; ``bfloat16`` from ml_dtypes (an optional package)."""
    if name == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return np.dtype(name)


def build_instance(case: dict[str, Any]) -> Instance:
    """The :class:`Instance` of an instance case (float32/float16 input kept as given, its
    sums judged at that precision)."""
    dtype = _float_dtype(case.get("dtype", "float64"))
    p = np.asarray(case["p"], dtype=dtype)
    q = np.asarray(case["q"], dtype=dtype)
    atol = as_float64("p", p)[1].sum_tolerance
    return Instance(p, q, case["n"], case["scheme"], case["top_k"], atol=atol)


def components_for(case: dict[str, Any]) -> list[str]:
    """Every component a case goes through (a case may name its own ``components``)."""
    if case["kind"] == "multistep":
        suffix = f":{case['rule']}" if case["method"] == "spectr" else ""
        return [f"multistep:{case['method']}{suffix}"]
    if case["kind"] == "budget":
        return [f"budget:{case['scheme']}"]
    if case["kind"] in SURFACES:
        return SURFACES[case["kind"]][0](case)
    if "components" in case:
        return list(case["components"])
    decoders = []
    if "decoder_dtypes" in case:
        decoders = [f"decode:{m}" for m in decode_methods(case["scheme"], case["n"])]
    return (
        [f"scheme:{case['scheme']}"]
        + [f"method:{m}" for m in method_names()]
        + [f"rule:{r}" for r in rules.names()]
        + decoders
    )


def known_components() -> list[str]:
    """Every component name a campaign can produce (for checking ``--only`` prefixes)."""
    names = [f"scheme:{s}" for s in SCHEMES] + [f"method:{m}" for m in method_names()]
    decoders = dict.fromkeys(m for scheme in SCHEMES for m in decode_methods(scheme, 2))
    decoders |= dict.fromkeys(decode_methods("iid", 1))
    names += [f"rule:{r}" for r in rules.names()] + [f"decode:{m}" for m in decoders]
    names += [f"multistep:{m}" for m in MULTISTEP_METHODS if m != "spectr"]
    names += [f"budget:{s}" for s in SCHEMES]
    names += [*engine_component_names(), *referee_component_names(), "cli:decode"]
    from otlp.fuzz.cases import MULTISTEP_RULES

    return names + [f"multistep:spectr:{r}" for r in MULTISTEP_RULES]


def check_only(only: Iterable[str], name: str = "only") -> frozenset[str]:
    """``only`` as a set of component prefixes, each matching at least one component (a
    ``ValueError`` naming ``name`` otherwise: a typo must not run an empty campaign)."""
    prefixes = frozenset(only)
    known = known_components()
    for prefix in sorted(prefixes):
        if not isinstance(prefix, str) or not any(c.startswith(prefix) for c in known):
            kinds = ", ".join(sorted({c.partition(":")[0] + ":" for c in known}))
            raise ValueError(f"{name}: no component starts with {prefix!r}; components: {kinds}")
    return prefixes


def run_case(case: dict[str, Any], only: frozenset[str] = frozenset()) -> list[Outcome]:
    """Every component's outcome on ``case`` (restricted to ``only`` prefixes if given)."""
    wanted = [c for c in components_for(case) if not only or any(c.startswith(o) for o in only)]
    if case["kind"] == "multistep":
        return [_guarded(name, _check_multistep, case) for name in wanted]
    if case["kind"] == "budget":
        return [_guarded(name, _check_budget, case) for name in wanted]
    if case["kind"] in SURFACES:
        return [_guarded(name, _no_refusal(SURFACES[case["kind"]][1]), case) for name in wanted]
    try:
        inst = build_instance(case)
    except ValueError as exc:  # a clear refusal of the input itself (e.g. n > support)
        return [Outcome(name, "refused", f"Instance: {exc}") for name in wanted]
    except Exception as exc:
        return [Outcome(name, "failed", f"Instance: {_describe(exc)}") for name in wanted]
    rng = np.random.default_rng(case["index"])
    checks = {
        "scheme": _check_scheme,
        "method": _check_method,
        "rule": _check_rule,
        "decode": _check_decode,
    }
    out = []
    for name in wanted:
        kind, _, target = name.partition(":")
        out.append(_guarded(name, checks[kind], inst, target, rng, case))
    return out


def _no_refusal(check: Callable[[dict[str, Any]], list[str]]) -> Callable[..., list[str]]:
    """``check`` with a ``ValueError`` escaping it counted as a failure: the surface checks
    expect their refusals themselves, so one they did not catch is wrong, never a refusal."""

    def run(case: dict[str, Any]) -> list[str]:
        try:
            return check(case)
        except ValueError as exc:
            return [f"unexpected {_describe(exc)}"]

    return run


class CheckTimeout(Exception):
    """A check ran past :data:`TIMEOUT_S` (raised by the alarm in worker processes)."""


def _alarm(signum: int, frame: Any) -> None:
    raise CheckTimeout(f"still running after {TIMEOUT_S} s")


def _guarded(name: str, check: Any, *args: Any) -> Outcome:
    timed = limit_time()
    compiled, start = compile_seconds(), time.perf_counter()
    error: Exception | None = None
    try:
        problems = check(*args)
    except Exception as exc:  # incl. MemoryError under the workers' memory cap, CheckTimeout
        error = exc
    finally:
        if timed:
            try:  # a timeout noticed only when a long C call returns lands here
                signal.alarm(0)
            except CheckTimeout as exc:
                error = exc
    seconds = time.perf_counter() - start
    if isinstance(error, ValueError):
        return Outcome(name, "refused", str(error)[:500], seconds)
    if error is not None:
        return Outcome(name, "failed", _describe(error)[:500], seconds)
    # a kernel compiled on its first use (a signature no warm-up reached) is not the check's
    # work: seed 56's engine:block cases 6506 and 22912 took 17.3 s and 5.3 s, 0.1 s on replay
    compiling = compile_seconds() - compiled
    if seconds - compiling > SLOW_S:
        problems = [*problems, f"took {seconds:.1f} s ({compiling:.1f} s of it compiling)"]
    status = "failed" if problems else "ok"
    return Outcome(name, status, "; ".join(problems), seconds)


def limit_time() -> bool:
    """Arm a :data:`TIMEOUT_S` alarm when running in a fuzz worker (see
    :func:`limit_worker`); returns whether it did."""
    if not _LIMITED:
        return False
    signal.alarm(TIMEOUT_S)
    return True


_LIMITED: list[bool] = []


def limit_worker(memory_bytes: int) -> None:
    """In a worker process: cap its address space (a runaway allocation becomes a
    MemoryError, never swapping) and time-limit each check; ignore Ctrl-C (the parent stops
    the pool)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGALRM, _alarm)
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    _LIMITED.append(True)
    warm_up()
    # the pool's terminate must end a worker: no handler left by a command run in-process
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def warm_up() -> None:
    """Import every backend (POT, cvxpy: seconds on a loaded machine) and compile (or load
    from numba's cache) global resolution's kernels for every scheme it serves, so that no
    timed check pays for imports or compilation."""
    p, q = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.3, 0.5])
    for method in method_names():
        with contextlib.suppress(ValueError):  # not applicable here; nothing to warm
            solve(Instance(p, q, 2), method, check=False)
    for decoder in DECODE_METHODS:
        verify_drafts(p, q, np.array([[0]]), method=decoder, rng=0)
    for scheme, n, rows in (
        ("iid", 2, q),
        ("without_replacement", 2, q),
        ("without_replacement", 3, q),
        ("independent", 2, [q, p]),
    ):
        solve(Instance(p, rows, n, scheme), "global_resolution")
    # Tiny masses take other branches of the kernels (their own compiled signatures), and the
    # n >= 3 without-replacement double quadrature runs only on a unit with several tokens.
    tiny_p = np.array([7.62e-300, 6.88e-300, 6.95e-300, 1.0])
    tiny_q = np.array([1.59e-200, 0.25298641363590146, 0.34201813063095515, 0.40499545573314355])
    solve(Instance(tiny_p, tiny_q, 3, "without_replacement"), "global_resolution")
    warm_up_engine()
    warm_up_decode_cli()


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def probability_problems(what: str, values: np.ndarray, tol: float) -> list[str]:
    """Why ``values`` is not a probability vector within ``tol`` (empty if it is)."""
    values = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(values)):
        return [f"{what}: non-finite entries"]
    problems = []
    if values.size and values.min() < -tol:
        problems.append(f"{what}: entry {values.min():.3g}")
    total = float(values.sum())
    if abs(total - 1.0) > tol:
        problems.append(f"{what}: sums to {total!r}")
    return problems


# ----- schemes -------------------------------------------------------------------------------
def _check_scheme(
    inst: Instance, scheme: str, rng: np.random.Generator, case: dict[str, Any]
) -> list[str]:
    cols = inst.columns()
    problems = probability_problems("column masses", cols.mass, SLICE_TOL)
    drafts = inst.sample_drafts(rng, SAMPLES)
    rows = np.atleast_2d(inst.q)
    for d in range(inst.n):
        row = rows[d] if inst.scheme == "independent" else rows[0]
        if drafts.min() < 0 or drafts.max() >= inst.vocab_size or np.any(row[drafts[:, d]] <= 0):
            problems.append(f"draw {d}: a drafted token with zero draft probability")
            break
    if inst.scheme == "without_replacement" and any(len(set(r)) < inst.n for r in drafts):
        problems.append("without replacement: a repeated drafted token")
    alpha = optimal_acceptance(inst).alpha_star
    if not (math.isfinite(alpha) and -SLICE_TOL <= alpha <= 1 + SLICE_TOL):
        problems.append(f"alpha* = {alpha!r}")
    return problems


# ----- methods -------------------------------------------------------------------------------
def _given_omegas(case: dict[str, Any]) -> list[np.ndarray]:
    """The draft tuples a case names (a reproducer's failing omegas), as int64 arrays."""
    return [np.asarray(omega, dtype=np.int64) for omega in case.get("omegas", [])]


def _check_method(
    inst: Instance, method: str, rng: np.random.Generator, case: dict[str, Any]
) -> list[str]:
    tol = LOOSE_TOL.get(method, SLICE_TOL)
    options = {"tau": case["tau"]} if method in TAU_METHODS and "tau" in case else {}
    plan = solve(inst, method, check=False, **options)
    problems: list[str] = []
    if not case.get("slices_only"):  # a reproducer about one token: no whole-plan checks
        report = verify(plan)
        problems = [] if report.ok else [f"verify: {'; '.join(report.problems)}"]
        mass = plan.columns.mass
        for column in np.flatnonzero(mass > 0):
            label = f"column {column} (mass {mass[column]:.3g})"
            found = probability_problems(label, plan.column_slice(int(column)), tol)
            if found:
                problems += found
                break
    omegas = _given_omegas(case)
    if not case.get("slices_only"):
        omegas += list(inst.sample_drafts(rng, 4))
    for omega in omegas:
        if case.get("slices_only") and hasattr(plan, "token_report"):
            _, token = plan.token_report(omega)
            if token.fallback:  # a small valid instance must converge without fallback
                problems.append(f"token_report({omega.tolist()}): fell back ({token.message})")
        pi = plan.slice(omega)
        problems += probability_problems(f"slice({omega.tolist()})", pi, tol)
        tokens = np.atleast_1d(plan.sample(omega, rng, SAMPLES))
        if tokens.min() < 0 or tokens.max() >= inst.vocab_size or np.any(pi[tokens] <= 0):
            problems.append(f"sample({omega.tolist()}): a token outside pi's support")
        if problems:
            break
    return problems


# ----- rules ---------------------------------------------------------------------------------
def _frontier_problems(rule: MentoredDecoding, inst: Instance) -> list[str]:
    """Mentored decoding's acceptance-KL frontier: non-empty, both coordinates nondecreasing."""
    family = rule.frontier(inst)
    if family.kl.size == 0:
        return ["mentored frontier is empty"]
    if np.any(np.diff(family.kl) < -SLICE_TOL) or np.any(np.diff(family.acceptance) < -SLICE_TOL):
        return ["mentored frontier is not monotone"]
    return []


def _joint_problems(rule: Any, inst: Instance) -> list[str]:
    """Every positive-mass row of the rule's exact joint is a distribution (to SLICE_TOL),
    whatever its mass; skipped when the joint is over :data:`JOINT_ROWS` columns."""
    try:
        members, _ = rule.draft_columns(inst)
        if members.shape[0] > JOINT_ROWS:
            return []
        joint = rule.exact_joint(inst)
    except ProblemTooLarge:
        return []
    for row in np.flatnonzero(joint.mass > 0):
        label = f"exact joint row {joint.members[row].tolist()} (mass {joint.mass[row]:.3g})"
        found = probability_problems(label, joint.out[row], SLICE_TOL)
        if found:
            return found
    return []


def _check_rule(
    inst: Instance, name: str, rng: np.random.Generator, case: dict[str, Any]
) -> list[str]:
    rule = rules.get(name)
    problems = []
    acceptance = rule.acceptance(inst)
    if not (math.isfinite(acceptance) and -SLICE_TOL <= acceptance <= 1 + SLICE_TOL):
        problems.append(f"acceptance = {acceptance!r}")
    output = rule.output_distribution(inst)
    problems += probability_problems("output law", output, SLICE_TOL)
    if rule.lossless:
        l1 = float(np.abs(output - inst.p).sum())
        if not l1 <= LOSSLESS_TOL:
            problems.append(f"lossless rule: L1(output, p) = {l1:.3g}")
        own = rule.alpha_star(inst)
        if acceptance > own + LOSSLESS_TOL:
            problems.append(f"acceptance {acceptance!r} above its own alpha* {own!r}")
    if isinstance(rule, MentoredDecoding):
        problems += _frontier_problems(rule, inst)
    if hasattr(rule, "exact_joint"):
        problems += _joint_problems(rule, inst)
    draw = rule.draw(inst, rng, SAMPLES)
    for drafts in [*_given_omegas(case), *draw.drafts[:4]]:
        found = probability_problems(
            f"conditional({drafts.tolist()})", rule.conditional(inst, drafts), SLICE_TOL
        )
        if found:
            problems += found
            break
    tokens = np.asarray(draw.tokens)
    if tokens.min() < 0 or tokens.max() >= inst.vocab_size:
        problems.append("sample: token id out of range")
    elif rule.lossless and np.any(inst.p[tokens] <= 0):
        problems.append("sample: a token with p = 0 from a lossless rule")
    return problems


# ----- decoder inputs ------------------------------------------------------------------------
def decode_methods(scheme: str, n: int) -> list[str]:
    """The ``verify_drafts`` methods a case of ``scheme`` with n drafts goes through."""
    if scheme == "iid":
        methods = [m for m in DECODE_METHODS if m != "sps" or n == 1]
        return methods + (["spechub"] if n == 2 else [])
    if scheme == "independent" and n != 2:
        return []
    return list(SCHEME_METHODS[scheme])


def _decoder_array(values: Any, dtype: str) -> Any:
    """A softmax normalised in float64, then rounded to the model's dtype: numpy (float16,
    bfloat16, float32, float64) or a torch tensor (``torch.bfloat16``, ``torch.float16``)."""
    arr = np.asarray(values, dtype=np.float64)
    arr = arr / arr.sum(axis=-1, keepdims=True)
    if dtype.startswith("torch."):
        import torch

        return torch.tensor(arr).to(getattr(torch, dtype.removeprefix("torch.")))
    return arr.astype(_float_dtype(dtype))


def _least_likely_drafts(given: Instance, method: str) -> np.ndarray:
    """A possible draft row of the least likely tokens (tuple masses near underflow): draw d
    takes row d's smallest positive token (distinct tokens without replacement; greedy: the
    fixed tokens plus the least likely other; SpecHub: the hub plus the least likely other)."""
    rows = given.draft_rows
    order = np.argsort(np.where(rows[0] > 0, rows[0], np.inf))  # least likely first
    if given.scheme in ("without_replacement",):
        local = order[: given.n]
    elif given.scheme == "greedy":
        local = np.append(np.arange(given.n - 1), max(order[0], given.n - 1))
    elif method == "spechub":
        hub = int(np.argmax(rows[0]))
        others = order[(order != hub) & (rows[0][order] > 0)]
        local = np.array([hub, others[0] if others.size else hub])  # one-hot: (hub, hub)
    else:
        local = np.array([np.argmin(np.where(row > 0, row, np.inf)) for row in rows])
    return given.tokens[local][None, :]


def _misordered_pair(given: Instance) -> np.ndarray | None:
    """An independent pair whose first token only the second drafter can produce, or None."""
    if given.scheme != "independent":
        return None
    rows = given.draft_rows
    only_second = np.flatnonzero((rows[0] <= 0) & (rows[1] > 0))
    if only_second.size == 0:
        return None
    return given.tokens[[only_second[0], int(np.argmax(rows[1]))]][None, :]


def _check_decode(
    inst: Instance, method: str, rng: np.random.Generator, case: dict[str, Any]
) -> list[str]:
    """:func:`otlp.verify_drafts` on p and q in the case's ``decoder_dtypes`` (a model's
    float16/bfloat16/float32/float64 softmax as numpy or torch, possibly mixed), for the
    case's scheme, with drafts drawn from the q the decoder is handed, the least likely
    possible drafts (tuple masses near underflow) and any drafts the case names. Those inputs
    are valid, so any refusal other than a size limit is a failure; every token must be in
    range with p > 0. An independent pair whose first token only the second drafter can
    produce must be refused, naming ``drafts[b, 0]`` (pairs are ordered)."""
    scheme = case["scheme"]
    if any(d.startswith("torch.") for d in case["decoder_dtypes"]) and not find_spec("torch"):
        return []  # torch is optional: its dtypes are checked where it is installed
    p_in, q_in = (
        _decoder_array(case[key], dtype)
        for key, dtype in zip(("p", "q"), case["decoder_dtypes"], strict=True)
    )
    p_used, kind_p = as_float64("p", p_in)
    q_used, kind_q = as_float64("q", q_in)
    atol = max(kind_p.sum_tolerance, kind_q.sum_tolerance)
    q_arg = list(q_used) if scheme == "independent" else q_used
    try:
        given = Instance(p_used, q_arg, inst.n, scheme, top_k=inst.top_k, atol=atol)
    except ValueError:  # the rounded q cannot draw n tokens (e.g. its support underflowed)
        return []
    drafts = np.vstack([given.sample_drafts(rng, 4), _least_likely_drafts(given, method)])
    if "drafts" in case:
        drafts = np.vstack([np.asarray(case["drafts"], dtype=np.int64), drafts])
    if method == "spechub":  # its pairs always hold the hub
        hub = int(given.tokens[np.argmax(given.draft_rows[0])])
        distinct = (drafts[:, 0] != drafts[:, 1]) | (given.k == 1)
        drafts = drafts[(drafts == hub).any(axis=1) & distinct]
        if drafts.shape[0] == 0:
            return []
    options: dict[str, Any] = {"scheme": scheme, "method": method, "top_k": inst.top_k}
    if method == "global_resolution" and "tau" in case:
        options["tau"] = case["tau"]
    try:
        result = verify_drafts(p_in, q_in, drafts, rng=case["index"], **options)
    except ValueError as exc:
        if not re.match(r"(p|q|drafts)[\[:]", str(exc)):
            raise  # a stated limit (size, n for the method): a clear refusal
        return [f"refused a valid decoder input ({'/'.join(case['decoder_dtypes'])}): {exc}"]
    tokens = np.asarray(result.tokens)
    if tokens.min() < 0 or tokens.max() >= p_used.shape[-1]:
        return [f"token ids {tokens.tolist()} out of range"]
    if np.any(p_used.reshape(-1)[tokens] <= 0):
        return [f"a token with p = 0 among {tokens.tolist()} for drafts {drafts.tolist()}"]
    misordered = _misordered_pair(given)
    if misordered is not None:
        try:
            verify_drafts(p_in, q_in, misordered, rng=0, **options)
        except ValueError as exc:
            if not str(exc).startswith("drafts[0, 0]:"):
                return [f"misordered pair {misordered.tolist()} refused as: {exc}"]
        else:
            return [f"accepted the misordered independent pair {misordered.tolist()}"]
    return []


# ----- budget adherence (issue 24) -------------------------------------------------------------
BUDGET_ROWS = 1  # decoder rows per budget case
# One bounded step: a Newton iteration (its direction at most EXACT_WORK + CG_WORK flops;
# 1-3 s on this 2-core machine under load) or a stage (H*, an evaluation, a unit's exact
# fallback) that its estimate let start (otlp.solvers.global_resolution.budget).
BOUNDED_STEP_S = 3.0


def overrun_work(seconds: float, cpu_seconds: float, allowed: float) -> float:
    """Wall seconds past ``allowed``, scaled by the share of the CPU the call got."""
    share = min(max(cpu_seconds, 0.0) / seconds, 1.0) if seconds > 0 else 1.0
    return max(seconds - allowed, 0.0) * share


def _check_budget(case: dict[str, Any]) -> list[str]:
    """:func:`otlp.verify_drafts` (global resolution) under the case's tiny ``time_budget``:
    every row of valid drafts gets a token with p > 0 (never ProblemTooLarge), and the call
    takes at most ``BUDGET_ROWS`` x (1.2 budget + ``BOUNDED_STEP_S``), numba's compilation
    of kernels on their first use excluded. The budget is wall-clock time; the step past it
    is work, so the overrun is counted at the share of the CPU the call got (a call
    preempted by other processes for half its run has half its overrun counted: the same
    code on a loaded machine must not fail where it passes on a quiet one)."""
    p = np.asarray(case["p"], dtype=np.float64)
    q = np.asarray(case["q"], dtype=np.float64)
    inst = Instance(p, q, case["n"], case["scheme"])
    drafts = inst.sample_drafts(np.random.default_rng(case["index"]), BUDGET_ROWS)
    budget = case["time_budget"]
    compiled, start, cpu_start = compile_seconds(), time.perf_counter(), time.process_time()
    try:
        result = verify_drafts(
            p,
            q,
            drafts,
            method="global_resolution",
            scheme=case["scheme"],
            tau=case["tau"],
            time_budget=budget,
            rng=case["index"],
        )
    except ValueError as exc:
        return [f"no token for valid drafts {drafts.tolist()}: {exc}"]
    compiling = compile_seconds() - compiled  # once per kernel: not the call's work
    seconds = time.perf_counter() - start - compiling
    cpu_seconds = time.process_time() - cpu_start - compiling
    problems = []
    tokens = np.asarray(result.tokens)
    if tokens.min() < 0 or tokens.max() >= p.size or np.any(p[tokens] <= 0):
        problems.append(f"tokens {tokens.tolist()} out of range or with p = 0")
    overrun = overrun_work(seconds, cpu_seconds, BUDGET_ROWS * 1.2 * budget)
    if overrun > BUDGET_ROWS * BOUNDED_STEP_S:
        problems.append(
            f"{seconds:.2f} s ({cpu_seconds:.2f} s CPU) for {BUDGET_ROWS} rows at a budget of "
            f"{budget:g} s per call: {overrun:.2f} s of work past 1.2 x the budget "
            f"(allowed {BUDGET_ROWS * BOUNDED_STEP_S:.2f} s)"
        )
    return problems


# ----- multi-step ----------------------------------------------------------------------------
def _check_multistep(case: dict[str, Any]) -> list[str]:
    target, draft = model_pair(
        case["model"],
        case["vocab"],
        seed=case["seed"],
        distance=case["distance"],
        concentration=case["concentration"],
        sparsity=case["sparsity"],
        depth=case["gamma"] + 2,
    )
    gamma, paths, method = case["gamma"], case["paths"], case["method"]
    options = {"rule": case["rule"]} if method == "spectr" else {}
    law = output_law(target, draft, gamma, method, paths, **options)
    problems = []
    if not (1 - SLICE_TOL <= law.block_efficiency <= gamma + 1 + SLICE_TOL):
        problems.append(f"block efficiency {law.block_efficiency!r} outside [1, L+1]")
    output = output_distribution(target, draft, gamma, method, paths, **options)
    expected = target_distribution(target, gamma + 1)
    problems += probability_problems("output law", output, LOSSLESS_TOL)
    l1 = float(np.abs(output - expected).sum())
    if not l1 <= LOSSLESS_TOL:
        problems.append(f"not target-matching: L1 = {l1:.3g}")
    return problems
