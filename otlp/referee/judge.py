"""The referee: is a sampler's output law the target's on every searched instance?

:func:`referee` runs a sampler on seeded cases of the searched classes
(:mod:`otlp.referee.generate`) and returns a :class:`Verdict`:

1. **Exact mode** first: the sampler's law on a case is enumerated by branching its random
   source (:mod:`otlp.referee.symbolic`) over every drafted tuple or tree. A total-variation
   distance above ``exact_tolerance`` (1e-9, rounding) is a deviation, with certainty.
2. **Statistical mode** for the cases the exact mode cannot follow (a sampler that converts
   its draws to floats, calls numpy functions on them or draws from other distributions):
   every case is *screened* with a few draws, the ``confirm`` cases with the smallest
   p-value bounds are *confirmed* with the planned sample size of :func:`otlp.referee.stats.plan`
   at false-alarm ``false_alarm / confirm`` each (Bonferroni over the confirmations; screens
   decide nothing), miss probability ``miss`` at TV ``epsilon``. So a lossless sampler is
   flagged with probability at most ``false_alarm`` per verdict, and a sampler at TV >=
   ``epsilon`` on a confirmed case is missed with probability at most ``miss``.
3. A failing case is **shrunk** (:mod:`otlp.referee.shrink`) to a minimal one that still
   fails (exactly, or by the planned test at ``false_alarm`` per candidate), and written as a
   JSON **reproducer** that :func:`replay` (``otlp referee --replay FILE``) re-runs.
4. **Optimality gap**: the sampler's acceptance (P(output in drafts); block efficiency for
   trees) beside α* of the scheme (:func:`otlp.optimal_acceptance`, attained by otlp's exact
   OT rule ``maxflow_cs``) on every case it was measured on.

A sampler that raises or breaks its protocol on a valid case fails too (kind ``error``).
"""

from __future__ import annotations

import importlib
import json
import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from otlp.referee import generate, observe, shrink, stats
from otlp.referee.cases import POSITION_SCHEMES, TREE_SCHEMES, Case, PositionCase, case_from_json
from otlp.referee.symbolic import NotEnumerable

MODES = ("auto", "exact", "statistical")
EXACT_TOLERANCE = 1e-9
DEFAULT_CASES = 60
LOOKS = 5  # interim looks of a confirmation (N/16 .. N), Bonferroni over them
STATISTICAL_SHRINK_TRIES = 12  # planned tests spent on shrinking a statistical failure


@dataclass(frozen=True)
class Finding:
    """One case's result. ``kind``: ``exact`` (``tv`` is the exact distance), ``statistical``
    (``tv`` is the binned estimate at ``samples`` draws, ``p_value`` its null tail bound) or
    ``error`` (``message`` says what the sampler did)."""

    case: Case
    kind: str
    tv: float
    acceptance: float | None
    samples: int = 0
    p_value: float | None = None
    message: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "case": self.case.to_json(),
            "kind": self.kind,
            "tv": self.tv,
            "acceptance": self.acceptance,
            "samples": self.samples,
            "p_value": self.p_value,
            "message": self.message,
        }


@dataclass(frozen=True)
class GapRow:
    """A sampler's acceptance on one case beside α* of the scheme (position cases)."""

    label: str
    acceptance: float
    alpha_star: float
    exact: bool


@dataclass
class Verdict:
    """What the referee found. ``lossless`` is False when ``failure`` is set."""

    sampler: str
    protocol: str
    scheme: str
    epsilon: float
    false_alarm: float
    miss: float
    cases: int = 0
    exact_cases: int = 0
    statistical_cases: int = 0
    samples: int = 0
    worst_exact_tv: float = 0.0
    failure: Finding | None = None
    original: Finding | None = None
    confirm_plan: stats.Plan | None = None
    not_enumerable: str = ""
    gap: list[GapRow] = field(default_factory=list)
    seconds: float = 0.0
    reproducer: str | None = None

    @property
    def lossless(self) -> bool:
        return self.failure is None

    def summary(self) -> str:
        """A few lines for people: the verdict, the evidence, the gap."""
        head = f"referee {self.sampler} ({self.protocol}, {self.scheme}): "
        lines = []
        if self.failure is None:
            lines.append(head + "LOSSLESS on every searched case")
        else:
            f = self.failure
            what = {"exact": "exact TV", "statistical": "estimated TV", "error": "error"}[f.kind]
            detail = f"{f.message}" if f.kind == "error" else f"{what} {f.tv:.4g}"
            if f.kind == "statistical":
                detail += f" at {f.samples:,} draws, p <= {f.p_value:.2g}"
            lines.append(head + f"DEVIATION ({detail})")
            lines.append(f"  minimal case: {f.case.describe()}")
            if self.original is not None and self.original.case is not f.case:
                found = self.original
                tv = "" if found.kind == "error" else f" (TV {found.tv:.4g} there)"
                lines.append(f"  found on: {found.case.label}{tv}")
            if self.reproducer:
                lines.append(f"  reproducer: {self.reproducer}")
        lines.append(
            f"  {self.cases} cases ({self.exact_cases} exact, {self.statistical_cases} "
            f"statistical, {self.samples:,} draws) in {self.seconds:.1f} s"
        )
        if self.exact_cases:
            lines.append(f"  worst exact TV on passing cases: {self.worst_exact_tv:.3g}")
        if self.statistical_cases and self.confirm_plan is not None:
            plan = self.confirm_plan
            lines.append(
                f"  statistical power: TV >= {plan.epsilon:g} detected with probability >= "
                f"{1 - plan.miss:g} on a confirmed case; false alarm <= {self.false_alarm:g}"
            )
        if self.not_enumerable:
            lines.append(f"  not enumerable: {self.not_enumerable}")
        if self.gap:
            acc = np.mean([g.acceptance for g in self.gap])
            opt = np.mean([g.alpha_star for g in self.gap])
            name = "block efficiency" if self.protocol == "tree" else "acceptance"
            ref = "otlp rrs" if self.protocol == "tree" else "alpha*"
            lines.append(f"  mean {name} {acc:.4f} vs {ref} {opt:.4f} over {len(self.gap)} cases")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "sampler": self.sampler,
            "protocol": self.protocol,
            "scheme": self.scheme,
            "lossless": self.lossless,
            "epsilon": self.epsilon,
            "false_alarm": self.false_alarm,
            "miss": self.miss,
            "cases": self.cases,
            "exact_cases": self.exact_cases,
            "statistical_cases": self.statistical_cases,
            "samples": self.samples,
            "worst_exact_tv": self.worst_exact_tv,
            "failure": None if self.failure is None else self.failure.as_dict(),
            "found_on": None if self.original is None else self.original.as_dict(),
            "confirm_samples": None if self.confirm_plan is None else self.confirm_plan.samples,
            "not_enumerable": self.not_enumerable,
            "gap": [g.__dict__ for g in self.gap],
            "seconds": self.seconds,
            "reproducer": self.reproducer,
        }


def _check(
    protocol: str, scheme: str, epsilon: float, false_alarm: float, miss: float, mode: str
) -> None:
    if protocol not in observe.PROTOCOLS:
        raise ValueError(
            f"protocol: expected one of {', '.join(observe.PROTOCOLS)}, got {protocol!r}"
        )
    schemes = POSITION_SCHEMES if protocol == "position" else TREE_SCHEMES
    if scheme not in schemes:
        raise ValueError(
            f"scheme: expected one of {', '.join(schemes)} for {protocol}, got {scheme!r}"
        )
    if not 0.0005 <= epsilon <= 0.5:
        raise ValueError(f"epsilon: expected a TV distance in [0.0005, 0.5], got {epsilon}")
    if not 0 < false_alarm < 0.5:
        raise ValueError(f"false_alarm: expected a probability in (0, 0.5), got {false_alarm}")
    if not 0 < miss < 0.5:
        raise ValueError(f"miss: expected a probability in (0, 0.5), got {miss}")
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")


class _Judge:
    """One referee run's settings and counters."""

    def __init__(
        self,
        sampler: observe.Sampler,
        verdict: Verdict,
        rng: np.random.Generator,
        screen: int,
        confirm: int,
    ) -> None:
        self.sampler, self.verdict, self.rng = sampler, verdict, rng
        self.screen, self.confirm = screen, confirm
        self.findings: list[Finding] = []

    def exact(self, case: Case) -> Finding:
        try:
            obs = observe.exact(self.sampler, case)
        except (NotEnumerable, observe.InvalidOutput):
            raise
        except Exception as exc:  # the sampler crashed on a valid input
            return _error(case, exc)
        tv = stats.tv_statistic(obs.law, case.target)
        return Finding(case, "exact", tv, obs.acceptance)

    def draw(self, case: Case, samples: int) -> Finding:
        bin_of, binned = stats.binning(case.target)
        bins = binned.shape[0]
        try:
            obs = observe.sample(self.sampler, case, samples, self.rng, bin_of)
        except Exception as exc:  # any crash of the sampler is a finding
            return _error(case, exc)
        self.verdict.samples += samples
        tv = stats.tv_statistic(obs.law, binned)
        p_value = stats.false_alarm_bound(tv, samples, bins)
        return Finding(case, "statistical", tv, obs.acceptance, samples, p_value)

    def confirmed(self, case: Case, false_alarm: float) -> Finding:
        """The planned test on ``case`` at ``false_alarm``, looked at after N/16, N/8, N/4,
        N/2 and N draws (:data:`LOOKS`), each look at ``false_alarm / LOOKS``: it stops as
        soon as a deviation is certain enough."""
        bin_of, binned = stats.binning(case.target)
        bins = binned.shape[0]
        level = false_alarm / LOOKS
        plan = stats.plan(self.verdict.epsilon, level, self.verdict.miss, bins)
        if self.verdict.confirm_plan is None or plan.samples > self.verdict.confirm_plan.samples:
            self.verdict.confirm_plan = plan
        total, accepted, done = np.zeros(bins), 0.0, 0
        for look in range(LOOKS - 1, -1, -1):
            upto = math.ceil(plan.samples / 2**look)
            try:
                obs = observe.sample(self.sampler, case, upto - done, self.rng, bin_of)
            except Exception as exc:  # any crash of the sampler is a finding
                return _error(case, exc)
            self.verdict.samples += upto - done
            total += obs.law * (upto - done)
            accepted += obs.acceptance * (upto - done)
            done = upto
            tv = stats.tv_statistic(total / done, binned)
            p_value = min(1.0, LOOKS * stats.false_alarm_bound(tv, done, bins))
            if p_value <= false_alarm:
                break
        return Finding(case, "statistical", tv, accepted / done, done, p_value)


def _error(case: Case, exc: BaseException) -> Finding:
    return Finding(case, "error", math.nan, None, message=f"{type(exc).__name__}: {exc}")


def _failed(finding: Finding, false_alarm: float) -> bool:
    if finding.kind == "error":
        return True
    if finding.kind == "exact":
        return not finding.tv <= EXACT_TOLERANCE  # nan fails too
    return finding.p_value is not None and finding.p_value <= false_alarm


def referee(
    sampler: observe.Sampler,
    *,
    protocol: str | None = None,
    scheme: str | None = None,
    epsilon: float = 0.01,
    false_alarm: float = 1e-6,
    miss: float = 1e-3,
    cases: Sequence[Case] | int = DEFAULT_CASES,
    seed: int = 0,
    mode: str = "auto",
    screen_samples: int = 2000,
    confirm: int = 3,
    shapes: Sequence[str] | None = None,
    max_n: int = 3,
    smollm2: int = 0,
    shrink_failures: bool = True,
    reproducer: str | Path | None = None,
    name: str | None = None,
) -> Verdict:
    """Referee ``sampler``: is its output law the target's on every searched case?

    Parameters
    ----------
    sampler:
        A callable of the ``protocol`` (:mod:`otlp.referee.observe` describes both).
    protocol, scheme:
        ``position`` (schemes ``iid``, ``without_replacement``, ``independent``) or ``tree``
        (``iid``, ``without_replacement`` siblings): how the referee drafts for the sampler.
        None: the sampler's own ``protocol`` / ``scheme`` attribute, else position and iid.
    epsilon, false_alarm, miss:
        The statistical mode detects a total-variation distance >= ``epsilon`` on a confirmed
        case with probability >= 1 - ``miss``; a lossless sampler is flagged with probability
        <= ``false_alarm`` per verdict (:mod:`otlp.referee.stats`).
    cases:
        The number of seeded cases from the searched classes, or the cases themselves.
    mode:
        ``auto`` (exact where the sampler can be enumerated, else statistical), ``exact``
        (ValueError if it cannot be) or ``statistical``.
    screen_samples, confirm:
        Draws per case in the statistical screen; cases confirmed with the planned test.
    shapes:
        Tree shapes (names of :data:`otlp.referee.generate.TREE_SHAPES`); None = all.
    max_n:
        The most drafts of a position case.
    smollm2:
        Also search this many SmolLM2-135M states (position protocol, V = 1001, n = 2;
        statistical mode: too many drafted tuples to enumerate).
    shrink_failures:
        Shrink a failing case to a minimal one.
    reproducer:
        Where to write the JSON reproducer of a failure (None: not written).
    name:
        How the sampler is named in the verdict and the reproducer (``module:function`` lets
        :func:`replay` find it again).

    Returns
    -------
    Verdict
        ``lossless``, the minimal ``failure`` (and the ``original`` one), the cases judged
        exactly and statistically, the draws, the acceptance ``gap`` rows; ``summary()``.

    Raises
    ------
    ValueError
        Naming the argument: an unknown protocol, scheme, mode or tree shape, a TV or
        probability out of range, no cases, ``mode="exact"`` for a sampler that cannot be
        enumerated.

    Examples
    --------
    A sampler that forgets to update the residual after a rejection:

    >>> import numpy as np
    >>> def no_update(p, q, drafts, rng):
    ...     for x in drafts:
    ...         if rng.random() * q[x] < p[x]:
    ...             return int(x)
    ...     r = np.maximum(p - q, 0.0)
    ...     return int(rng.choice(p.shape[0], p=r / r.sum())) if r.sum() > 0 else int(x)
    >>> verdict = referee(no_update, cases=5)
    >>> verdict.lossless, verdict.failure.kind, round(verdict.failure.tv, 3)
    (False, 'exact', 0.15)
    >>> verdict.failure.case.describe()
    'V=2, n=2, iid, p=[0.5, 0.5], q=[0.2, 0.8]'
    """
    protocol = protocol or str(getattr(sampler, "protocol", "position"))
    scheme = scheme or str(getattr(sampler, "scheme", "iid"))
    _check(protocol, scheme, epsilon, false_alarm, miss, mode)
    start = time.perf_counter()
    label = name or _name_of(sampler)
    verdict = Verdict(label, protocol, scheme, epsilon, false_alarm, miss)
    if screen_samples < 1 or confirm < 1:
        raise ValueError(
            f"screen_samples, confirm: expected at least 1, got {screen_samples}, {confirm}"
        )
    if isinstance(cases, int):
        cases = _generated(protocol, scheme, cases, seed, shapes, max_n)
    elif len(cases) == 0:
        raise ValueError("cases: expected at least one case")
    if smollm2:
        if protocol != "position":
            raise ValueError("smollm2: SmolLM2 states are searched with the position protocol")
        cases = [*cases, *generate.smollm2_cases(smollm2, scheme, n=min(2, max_n), seed=seed)]
    judge = _Judge(sampler, verdict, np.random.default_rng([seed, 2026]), screen_samples, confirm)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        failure = _search(judge, list(cases), mode)
        if failure is not None:
            verdict.original = failure
            verdict.failure = _shrunk(judge, failure) if shrink_failures else failure
        _gap(judge)
    verdict.seconds = time.perf_counter() - start
    if verdict.failure is not None and reproducer is not None:
        verdict.reproducer = str(write_reproducer(verdict, reproducer))
    return verdict


def _name_of(sampler: object) -> str:
    for attr in ("name", "__qualname__"):
        value = getattr(sampler, attr, None)
        if isinstance(value, str):
            return value
    return repr(sampler)


def _generated(
    protocol: str, scheme: str, count: int, seed: int, shapes: Sequence[str] | None, max_n: int
) -> list[Case]:
    if count < 1:
        raise ValueError(f"cases: expected at least 1, got {count}")
    if protocol == "position":
        return list(generate.position_cases(count, scheme, seed, max_n=max_n))
    names = tuple(shapes) if shapes else tuple(generate.TREE_SHAPES)
    unknown = [s for s in names if s not in generate.TREE_SHAPES]
    if unknown:
        raise ValueError(f"shapes: unknown {unknown}; known: {', '.join(generate.TREE_SHAPES)}")
    return list(generate.tree_cases(count, scheme, seed, shapes=names))


def _search(judge: _Judge, cases: list[Case], mode: str) -> Finding | None:
    """The first exact failure, else the first confirmed statistical one, else None."""
    verdict = judge.verdict
    leftover: list[Case] = []
    enumerable = mode != "statistical"
    for case in cases:
        verdict.cases += 1
        if enumerable:
            try:
                finding = judge.exact(case)
            except NotEnumerable as exc:
                if mode == "exact":
                    raise ValueError(f"mode: the sampler is not enumerable ({exc})") from None
                verdict.not_enumerable = str(exc)
                if "drafted tuples or trees" not in str(exc):
                    enumerable = False  # the sampler itself: statistical from now on
                leftover.append(case)
                continue
            except observe.InvalidOutput as exc:
                return Finding(case, "error", math.nan, None, message=str(exc))
            judge.findings.append(finding)
            verdict.exact_cases += 1
            if _failed(finding, verdict.false_alarm):
                return finding
            verdict.worst_exact_tv = max(verdict.worst_exact_tv, finding.tv)
        else:
            leftover.append(case)
    if not leftover:
        return None
    verdict.statistical_cases = len(leftover)
    screens = []
    for case in leftover:
        finding = judge.draw(case, judge.screen)
        if finding.kind == "error":
            return finding
        screens.append(finding)
        judge.findings.append(finding)
    ranked = sorted(screens, key=lambda f: (f.p_value, -f.tv))
    for finding in ranked[: judge.confirm]:
        result = judge.confirmed(finding.case, verdict.false_alarm / judge.confirm)
        judge.findings.append(result)
        if _failed(result, verdict.false_alarm / judge.confirm):
            return result
    return None


def _shrunk(judge: _Judge, failure: Finding) -> Finding:
    """The failure on a minimal case: candidates are judged exactly where the sampler can be
    enumerated on them, else by the planned test at ``false_alarm`` (at most
    :data:`STATISTICAL_SHRINK_TRIES` of those); an error stays an error, a deviation a
    deviation."""
    false_alarm = judge.verdict.false_alarm
    planned = 0
    results: dict[int, Finding] = {}

    def fails(case: Case) -> bool:
        nonlocal planned
        try:
            finding = judge.exact(case)
        except observe.InvalidOutput as exc:
            finding = Finding(case, "error", math.nan, None, message=str(exc))
        except NotEnumerable:
            planned += 1
            if planned > STATISTICAL_SHRINK_TRIES:
                return False
            finding = judge.confirmed(case, false_alarm)
        if (finding.kind == "error") != (failure.kind == "error"):
            return False
        results[id(case)] = finding
        return _failed(finding, false_alarm)

    minimal = shrink.shrink(failure.case, fails)
    return results.get(id(minimal), failure)


def _gap(judge: _Judge) -> None:
    """Acceptance beside α* on the position cases measured (exact ones first)."""
    verdict = judge.verdict
    seen: set[int] = set()
    for finding in judge.findings:
        case = finding.case
        if finding.acceptance is None or id(case) in seen or finding.kind == "error":
            continue
        seen.add(id(case))
        if isinstance(case, PositionCase):
            try:
                best = case.alpha_star()
            except ValueError:
                continue
        else:
            best = tree_reference(case)
        verdict.gap.append(
            GapRow(case.label, float(finding.acceptance), best, finding.kind == "exact")
        )


def tree_reference(case: Any) -> float:
    """Block efficiency of otlp's closed-form rule for the scheme (``rrs`` / ``rrs without
    replacement`` at every node, :func:`otlp.decoding.outcome_law`) on a tree case, exactly."""
    from otlp.decoding import outcome_law

    method = "rrs" if case.scheme == "iid" else "rrs_without_replacement"
    total = 0.0
    for tokens, mass in case.drafts():
        p, q = case.context_laws(tokens)
        law = outcome_law(tokens, case.parents, p, q, method=method, scheme=case.scheme)
        total += mass * sum(prob * len(seq) for seq, prob in law.items())
    return total


def write_reproducer(verdict: Verdict, path: str | Path) -> Path:
    """Write the failure of ``verdict`` as JSON: the sampler, the protocol settings, the
    minimal case and what was found (:func:`replay` re-runs it)."""
    if verdict.failure is None:
        raise ValueError("verdict: no failure to write")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "otlp_referee_reproducer": 1,
        "sampler": verdict.sampler,
        "protocol": verdict.protocol,
        "scheme": verdict.scheme,
        "epsilon": verdict.epsilon,
        "false_alarm": verdict.false_alarm,
        "miss": verdict.miss,
        "finding": verdict.failure.as_dict(),
    }
    out.write_text(json.dumps(data, indent=1) + "\n")
    return out


def load_sampler(spec: str) -> tuple[observe.Sampler, dict[str, str]]:
    """``module:attribute`` (dotted attributes allowed) -> the callable and what it declares:
    ``protocol``, ``scheme`` and ``max_children`` (the most drafts or children per node it
    takes); a registry entry with a ``sampler`` attribute is unwrapped."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"sampler: expected MODULE:FUNCTION, got {spec!r}")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"sampler: cannot import {module_name!r} ({exc})") from None
    for part in attr.split("."):
        if isinstance(obj, dict) and part in obj:
            obj = obj[part]
        elif hasattr(obj, part):
            obj = getattr(obj, part)
        else:
            raise ValueError(f"sampler: {module_name!r} has no attribute {attr!r}")
    declared = {
        k: str(getattr(obj, k))
        for k in ("protocol", "scheme", "max_children")
        if getattr(obj, k, None) is not None
    }
    sampler = getattr(obj, "sampler", obj)
    if not callable(sampler):
        raise ValueError(f"sampler: {spec!r} is not callable")
    return sampler, declared


def replay(
    path: str | Path, sampler: observe.Sampler | None = None, name: str | None = None
) -> Verdict:
    """Re-run a reproducer file's case (with its sampler, or ``sampler`` called ``name``);
    no shrinking."""
    try:
        data = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"replay: {path} is not JSON ({exc})") from None
    if not isinstance(data, dict) or "otlp_referee_reproducer" not in data:
        raise ValueError(f"replay: {path} is not an otlp referee reproducer")
    case = case_from_json(data["finding"]["case"])
    if sampler is None:
        sampler, _ = load_sampler(data["sampler"])
        name = data["sampler"]
    return referee(
        sampler,
        protocol=data["protocol"],
        scheme=data["scheme"],
        epsilon=data["epsilon"],
        false_alarm=data["false_alarm"],
        miss=data["miss"],
        cases=[case],
        confirm=1,
        shrink_failures=False,
        name=name,
    )


def assert_lossless(sampler: observe.Sampler, **options: Any) -> Verdict:
    """For pytest: :func:`referee` the sampler and fail with the verdict (the minimal case and
    its reproducer, written to ``options["reproducer"]`` if given) when it deviates."""
    verdict = referee(sampler, **options)
    if not verdict.lossless:
        case = json.dumps(verdict.failure.case.to_json()) if verdict.failure else ""
        raise AssertionError(f"{verdict.summary()}\n  case JSON: {case}")
    return verdict
