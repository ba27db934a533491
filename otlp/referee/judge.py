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

Errors are not deviations. A sampler that raises, breaks its protocol (a token out of range,
a path that is not a tree path) or runs past the per-call time limit ``call_limit``
(:mod:`otlp.referee.clock`) on a valid case gets the verdict ``error`` (``Verdict.status``):
the smallest case that still makes it raise (a timeout is not shrunk: each try would cost the
limit) and the traceback's last line. Bad input — an argument out of range, a case whose laws
are not distributions, a malformed reproducer — is refused with a ``ValueError`` (or
``TypeError`` for a sampler that is not callable) naming the argument, before anything runs.
"""

from __future__ import annotations

import importlib
import json
import math
import numbers
import time
import traceback
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from otlp.referee import clock, generate, generators, layouts, observe, shrink, stats
from otlp.referee.cases import (
    POSITION_SCHEMES,
    TREE_SCHEMES,
    Case,
    PositionCase,
    TreeCase,
    case_from_json,
)
from otlp.referee.clock import DEFAULT_CALL_LIMIT, SamplerTimeout
from otlp.referee.symbolic import NotEnumerable

MODES = ("auto", "exact", "statistical")
EXACT_TOLERANCE = 1e-9
DEFAULT_CASES = 60
LOOKS = 5  # interim looks of a confirmation (N/16 .. N), Bonferroni over them
STATISTICAL_SHRINK_TRIES = 12  # planned tests spent on shrinking a statistical failure
STATUSES = ("lossless", "deviation", "error")


@dataclass(frozen=True)
class Finding:
    """One case's result. ``kind``: ``exact`` (``tv`` is the exact distance), ``statistical``
    (``tv`` is the binned estimate at ``samples`` draws, ``p_value`` its null tail bound) or
    ``error`` (``message`` says what the sampler did: the traceback's last line and where it
    was raised; ``timeout`` when it ran past the per-call time limit)."""

    case: Case
    kind: str
    tv: float
    acceptance: float | None
    samples: int = 0
    p_value: float | None = None
    message: str = ""
    timeout: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "case": self.case.to_json(),
            "kind": self.kind,
            "tv": self.tv,
            "acceptance": self.acceptance,
            "samples": self.samples,
            "p_value": self.p_value,
            "message": self.message,
            "timeout": self.timeout,
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
    """What the referee found. ``status`` is ``lossless`` (no failure), ``deviation`` (the
    output law is not the target's: ``failure`` is exact or statistical) or ``error`` (the
    sampler raised, broke its protocol or timed out: ``failure.kind == "error"``);
    ``lossless`` is True only for the first.

    The counts describe what ran: ``cases`` run (``exact_cases`` judged exactly, the failing
    one included, ``passed_exact`` of them passing, plus ``statistical_cases`` screened),
    ``samples`` draws completed; ``confirm_plan`` is the largest planned test that ran."""

    sampler: str
    protocol: str
    scheme: str
    epsilon: float
    false_alarm: float
    miss: float
    cases: int = 0
    exact_cases: int = 0
    passed_exact: int = 0
    statistical_cases: int = 0
    samples: int = 0
    worst_exact_tv: float = 0.0
    failure: Finding | None = None
    original: Finding | None = None
    confirm_plan: stats.Plan | None = None
    not_enumerable: str = ""
    note: str = ""
    gap: list[GapRow] = field(default_factory=list)
    seconds: float = 0.0
    reproducer: str | None = None

    @property
    def lossless(self) -> bool:
        return self.failure is None

    @property
    def status(self) -> str:
        """``lossless``, ``deviation`` or ``error`` (:data:`STATUSES`)."""
        if self.failure is None:
            return "lossless"
        return "error" if self.failure.kind == "error" else "deviation"

    def summary(self) -> str:
        """A few lines for people: the verdict, the evidence, the gap."""
        head = f"referee {self.sampler} ({self.protocol}, {self.scheme}): "
        lines = []
        f = self.failure
        if f is None:
            lines.append(head + "LOSSLESS on every searched case")
        elif f.kind == "error":
            lines.append(head + f"ERROR ({f.message})")
            case = f.case.describe(full=True)
            lines.append(f"  {'case' if f.timeout else 'smallest case'}: {case}")
        else:
            detail = f"exact TV {f.tv:.4g}"
            if f.kind == "statistical":
                detail = f"estimated TV {f.tv:.4g} at {f.samples:,} draws, {_p_text(f.p_value)}"
            lines.append(head + f"DEVIATION ({detail})")
            lines.append(f"  minimal case: {f.case.describe(full=True)}")
        if f is not None:
            if self.original is not None and self.original.case is not f.case:
                found = self.original
                tv = "" if found.kind == "error" else f" (TV {found.tv:.4g} there)"
                lines.append(f"  found on: {found.case.label}{tv}")
            if self.reproducer:
                lines.append(f"  reproducer: {self.reproducer}")
        draws = f", {self.samples:,} draws" if self.samples else ""
        lines.append(
            f"  {_plural(self.cases, 'case')} run ({self.exact_cases} exact, "
            f"{self.statistical_cases} statistical{draws}) in {self.seconds:.1f} s"
        )
        if self.passed_exact:
            lines.append(
                f"  worst exact TV on the {_plural(self.passed_exact, 'passing case')}: "
                f"{self.worst_exact_tv:.3g}"
            )
        if self.confirm_plan is not None:
            plan = self.confirm_plan
            lines.append(
                f"  statistical power: TV >= {plan.epsilon:g} detected with probability >= "
                f"{1 - plan.miss:g} on a confirmed case; false alarm <= {self.false_alarm:g}"
            )
        if self.not_enumerable:
            lines.append(
                f"  judged statistically where the exact mode could not follow: "
                f"{self.not_enumerable}"
            )
        if self.note:
            lines.append(f"  note: {self.note}")
        if self.gap:
            acc = np.mean([g.acceptance for g in self.gap])
            opt = np.mean([g.alpha_star for g in self.gap])
            name = "acceptance" if self.protocol == "position" else "block efficiency"
            ref = "alpha*" if self.protocol == "position" else "otlp rrs"
            over = _plural(len(self.gap), "case")
            lines.append(f"  mean {name} {acc:.4f} vs {ref} {opt:.4f} over {over}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "sampler": self.sampler,
            "protocol": self.protocol,
            "scheme": self.scheme,
            "status": self.status,
            "lossless": self.lossless,
            "epsilon": self.epsilon,
            "false_alarm": self.false_alarm,
            "miss": self.miss,
            "cases": self.cases,
            "exact_cases": self.exact_cases,
            "passed_exact": self.passed_exact,
            "statistical_cases": self.statistical_cases,
            "samples": self.samples,
            "worst_exact_tv": self.worst_exact_tv if self.passed_exact else None,
            "failure": None if self.failure is None else self.failure.as_dict(),
            "found_on": None if self.original is None else self.original.as_dict(),
            "confirm_samples": None if self.confirm_plan is None else self.confirm_plan.samples,
            "not_enumerable": self.not_enumerable,
            "note": self.note,
            "gap": [g.__dict__ for g in self.gap],
            "seconds": self.seconds,
            "reproducer": self.reproducer,
        }


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _p_text(p_value: float | None) -> str:
    """A p-value bound as people read it: never "p <= 0" (the bound underflows below the
    smallest float)."""
    if p_value is None:
        return "p unknown"
    if p_value < 1e-300:
        return "p < 1e-300"
    return f"p <= {p_value:.2g}"


def _real(name: str, value: object) -> float:
    """``value`` as a float; ValueError naming ``name`` for a string, a bool, None..."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name}: expected a number, got {value!r}")
    return float(value)


def _count(name: str, value: object, minimum: int) -> int:
    """``value`` as an int >= ``minimum``; ValueError naming ``name`` otherwise (2.5, "3",
    True and -1 included)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name}: expected an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name}: expected an integer >= {minimum}, got {value}")
    return int(value)


PROTOCOLS = (*observe.PROTOCOLS, *layouts.LAYOUTS)  # the engines' layouts are tree protocols


def base_protocol(protocol: str) -> str:
    """``position`` or ``tree``: the kind of case a protocol (or an engine layout) is fed."""
    return "position" if protocol == "position" else "tree"


def _check(
    protocol: str, scheme: str, epsilon: float, false_alarm: float, miss: float, mode: str
) -> None:
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol: expected one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    schemes = POSITION_SCHEMES if protocol == "position" else TREE_SCHEMES
    if scheme not in schemes:
        raise ValueError(
            f"scheme: expected one of {', '.join(schemes)} for {protocol}, got {scheme!r}"
        )
    if not 0.0005 <= _real("epsilon", epsilon) <= 0.5:
        raise ValueError(f"epsilon: expected a TV distance in [0.0005, 0.5], got {epsilon}")
    if not 0 < _real("false_alarm", false_alarm) < 0.5:
        raise ValueError(f"false_alarm: expected a probability in (0, 0.5), got {false_alarm}")
    if not 0 < _real("miss", miss) < 0.5:
        raise ValueError(f"miss: expected a probability in (0, 0.5), got {miss}")
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")


def _checked_cases(cases: object, protocol: str) -> list[Case] | int:
    """``cases`` as a count (an int >= 1) or a nonempty list of cases of ``protocol``;
    ValueError naming ``cases`` otherwise."""
    if isinstance(cases, numbers.Integral) and not isinstance(cases, bool):
        return _count("cases", cases, 1)
    if isinstance(cases, str | bytes) or not isinstance(cases, Sequence):
        raise ValueError(f"cases: expected a number of cases or a list of cases, got {cases!r}")
    if len(cases) == 0:
        raise ValueError("cases: expected at least one case")
    kind = PositionCase if protocol == "position" else TreeCase
    for i, case in enumerate(cases):
        if not isinstance(case, kind):
            raise ValueError(
                f"cases: item {i} is {type(case).__name__}, not a {kind.__name__} "
                f"(protocol {protocol})"
            )
    return list(cases)


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
        """The exact finding on ``case`` (raises :class:`NotEnumerable` where the exact mode
        cannot follow the sampler)."""
        try:
            obs = observe.exact(self.sampler, case)
        except NotEnumerable:
            raise
        except (Exception, SamplerTimeout) as exc:  # the sampler failed on a valid input
            return _error(case, exc)
        tv = stats.tv_statistic(obs.law, case.target)
        return Finding(case, "exact", tv, obs.acceptance)

    def draw(self, case: Case, samples: int) -> Finding:
        """A screen: ``samples`` draws on ``case``, the statistic and its p-value bound."""
        bin_of, binned = stats.binning(case.target)
        bins = binned.shape[0]
        try:
            obs = observe.sample(self.sampler, case, samples, self.rng, bin_of)
        except (Exception, SamplerTimeout) as exc:  # any failure of the sampler is a finding
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
        total, accepted, done = np.zeros(bins), 0.0, 0
        for look in range(LOOKS - 1, -1, -1):
            upto = math.ceil(plan.samples / 2**look)
            try:
                obs = observe.sample(self.sampler, case, upto - done, self.rng, bin_of)
            except (Exception, SamplerTimeout) as exc:  # any failure of the sampler
                return _error(case, exc)
            self.verdict.samples += upto - done
            total += obs.law * (upto - done)
            accepted += obs.acceptance * (upto - done)
            done = upto
            tv = stats.tv_statistic(total / done, binned)
            p_value = min(1.0, LOOKS * stats.false_alarm_bound(tv, done, bins))
            if p_value <= false_alarm:
                break
        if self.verdict.confirm_plan is None or plan.samples > self.verdict.confirm_plan.samples:
            self.verdict.confirm_plan = plan  # a planned test that ran to its decision
        return Finding(case, "statistical", tv, accepted / done, done, p_value)


def _error(case: Case, exc: BaseException) -> Finding:
    """The ``error`` finding of a sampler that failed on ``case``: the traceback's last line
    and where it was raised, a protocol break, or a timeout naming the case."""
    if isinstance(exc, SamplerTimeout):
        where = case.label or case.describe()
        message = f"SamplerTimeout: {exc} on the case {where}"
        return Finding(case, "error", math.nan, None, message=message, timeout=True)
    if isinstance(exc, observe.InvalidOutput):
        return Finding(case, "error", math.nan, None, message=f"broke the protocol: {exc}")
    frames = traceback.extract_tb(exc.__traceback__)
    last = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno} in {frames[-1].name})"
    message = f"raised {type(exc).__name__}: {exc}{last if frames else ''}"
    return Finding(case, "error", math.nan, None, message=message)


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
    max_n: int | None = None,
    max_children: int | None = None,
    smollm2: int = 0,
    shrink_failures: bool = True,
    reproducer: str | Path | None = None,
    name: str | None = None,
    call_limit: float | None = DEFAULT_CALL_LIMIT,
    rng: str | None = None,
) -> Verdict:
    """Referee ``sampler``: is its output law the target's on every searched case?

    Parameters
    ----------
    sampler:
        A callable of the ``protocol`` (:mod:`otlp.referee.observe` describes both).
    protocol, scheme:
        ``position`` (schemes ``iid``, ``without_replacement``, ``independent``), ``tree``
        (``iid``, ``without_replacement`` siblings) or an engine's layout of drafted trees
        (:data:`otlp.referee.layouts.LAYOUTS`: ``chain``, ``paths``, ``sglang_tree``,
        ``candidate_logits``; tree schemes): how the referee drafts for the sampler and calls
        it. None: the sampler's own ``protocol`` / ``scheme`` attribute, else position and iid.
    epsilon, false_alarm, miss:
        The statistical mode detects a total-variation distance >= ``epsilon`` on a confirmed
        case with probability >= 1 - ``miss``; a lossless sampler is flagged with probability
        <= ``false_alarm`` per verdict (:mod:`otlp.referee.stats`).
    cases:
        The number of seeded cases from the searched classes (an int >= 1), or a list of
        :class:`~otlp.referee.cases.PositionCase` / :class:`~otlp.referee.cases.TreeCase`.
    seed:
        Seed (>= 0) of the generated cases and of the referee's draws.
    mode:
        ``auto`` (exact where the sampler can be enumerated, else statistical), ``exact``
        (ValueError if it cannot be) or ``statistical``.
    screen_samples, confirm:
        Draws per case in the statistical screen; cases confirmed with the planned test.
    shapes:
        Tree shapes (names of :data:`otlp.referee.generate.TREE_SHAPES`); None = the
        sampler's own ``shapes`` attribute, if any, else the default eight
        (:data:`~otlp.referee.generate.DEFAULT_SHAPES`), or chains only for a sampler taking one
        child per node (``max_children == 1``).
    max_n:
        The most drafts of a position case (>= 1); None = ``max_children``, else 3.
    max_children:
        The most drafts or children per node the sampler takes; None = its own
        ``max_children`` attribute, if any (the command line reads a registry entry's).
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
    call_limit:
        Seconds one call of the sampler may take (:mod:`otlp.referee.clock`); a call that
        runs longer is an ``error`` verdict naming the case. None: no limit.
    rng:
        The generator the sampler takes as its last argument
        (:data:`otlp.referee.generators.KINDS`: ``numpy``, ``torch``, ``torch-rows``,
        ``torch-global``, ``python``); None: its own ``rng`` attribute, else numpy. Only numpy
        draws can be followed by the exact mode; the others are judged statistically.

    Returns
    -------
    Verdict
        ``status`` (``lossless``, ``deviation``, ``error``), the minimal ``failure`` (and the
        ``original`` one), the cases judged exactly and statistically, the draws, the
        acceptance ``gap`` rows; ``summary()``.

    Raises
    ------
    TypeError
        ``sampler`` is not callable.
    ValueError
        Naming the argument: an unknown protocol, scheme, mode or tree shape, a TV or
        probability out of range, no cases or a count that is not an integer, a case of the
        other protocol, a negative seed, ``mode="exact"`` for a sampler that cannot be
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
    >>> verdict.status, verdict.failure.kind, round(verdict.failure.tv, 3)
    ('deviation', 'exact', 0.15)
    >>> verdict.failure.case.describe()
    'V=2, n=2, iid, p=[0.5, 0.5], q=[0.2, 0.8]'
    """
    if not callable(sampler):
        raise TypeError(f"sampler: expected a callable of the protocol, got {sampler!r}")
    protocol = protocol or str(getattr(sampler, "protocol", "position"))
    scheme = scheme or str(getattr(sampler, "scheme", "iid"))
    _check(protocol, scheme, epsilon, false_alarm, miss, mode)
    kind = generators.checked_kind(rng or getattr(sampler, "rng", None) or "numpy")
    layout = layouts.LAYOUTS.get(protocol)
    options = None if layout is None else layouts.Options.of(layout, sampler)
    seed = _count("seed", seed, 0)
    if max_children is None:
        max_children = getattr(sampler, "max_children", None)
    if max_children is not None:
        max_children = _count("max_children", max_children, 1)
    if shapes is None:
        shapes = getattr(sampler, "shapes", None)
    if layout is not None and layout.chains_only:
        if shapes is not None and not set(shapes) <= set(generate.CHAIN_SHAPES):
            raise ValueError(f"shapes: the {protocol} layout takes chains, got {list(shapes)}")
        max_children = 1
    max_n = _count("max_n", max_n if max_n is not None else (max_children or 3), 1)
    smollm2 = _count("smollm2", smollm2, 0)
    screen_samples = _count("screen_samples", screen_samples, 1)
    confirm = _count("confirm", confirm, 1)
    if call_limit is not None and not _real("call_limit", call_limit) > 0:
        raise ValueError(f"call_limit: expected seconds > 0 or None, got {call_limit}")
    checked = _checked_cases(cases, base_protocol(protocol))
    if layout is not None and layout.chains_only and not isinstance(checked, int):
        for case in checked:
            if isinstance(case, TreeCase) and case.depth != case.parents.shape[0]:
                raise ValueError(f"cases: the {protocol} layout takes chains, got {case.parents}")
    start = time.perf_counter()
    label = name or _name_of(sampler)
    verdict = Verdict(label, protocol, scheme, float(epsilon), float(false_alarm), float(miss))
    if options is not None and layout is not None:
        verdict.note = options.note(layout)
    if isinstance(checked, int):
        truncated = options is not None and options.truncate
        checked = _generated(
            base_protocol(protocol), scheme, checked, seed, shapes, max_n, max_children, truncated
        )
    if smollm2:
        if protocol != "position":
            raise ValueError("smollm2: SmolLM2 states are searched with the position protocol")
        checked = [*checked, *generate.smollm2_cases(smollm2, scheme, n=min(2, max_n), seed=seed)]
    with (
        generators.one_verdict(kind) as handed,
        clock.limited(
            generators.hand(sampler, handed)
            if layout is None
            else layouts.LayoutSampler(sampler, protocol, handed),
            call_limit,
        ) as limited,
    ):
        draws = np.random.default_rng([seed, 2026])
        judge = _Judge(limited, verdict, draws, screen_samples, confirm)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            failure = _search(judge, checked, mode)
            verdict.cases = verdict.exact_cases + verdict.statistical_cases
            if failure is not None:
                verdict.original = failure
                verdict.failure = (
                    _shrunk(judge, failure) if shrink_failures and not failure.timeout else failure
                )
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
    protocol: str,
    scheme: str,
    count: int,
    seed: int,
    shapes: Sequence[str] | None,
    max_n: int,
    max_children: int | None,
    truncated: bool = False,
) -> list[Case]:
    if protocol == "position":
        return list(generate.position_cases(count, scheme, seed, max_n=max_n))
    names = generate.searched_shapes(shapes, max_children)
    return list(generate.tree_cases(count, scheme, seed, shapes=names, truncated=truncated))


def _search(judge: _Judge, cases: list[Case], mode: str) -> Finding | None:
    """The first exact failure or error, else the first confirmed statistical one, else
    None. A case the exact mode cannot follow goes to the statistical mode (every later case
    too, unless only that case was too large), and the reason is kept in the verdict."""
    verdict = judge.verdict
    leftover: list[Case] = []
    enumerable = mode != "statistical"
    reasons: list[str] = []
    for case in cases:
        if enumerable:
            try:
                finding = judge.exact(case)
            except NotEnumerable as exc:
                if mode == "exact":
                    raise ValueError(f"mode: the sampler is not enumerable ({exc})") from None
                if str(exc) not in reasons:
                    reasons.append(str(exc))
                enumerable = exc.case_only  # the sampler itself: statistical from now on
                leftover.append(case)
                continue
            judge.findings.append(finding)
            verdict.exact_cases += 1
            if _failed(finding, verdict.false_alarm):
                return finding
            verdict.passed_exact += 1
            verdict.worst_exact_tv = max(verdict.worst_exact_tv, finding.tv)
        else:
            leftover.append(case)
    verdict.not_enumerable = "; ".join(reasons)
    if not leftover:
        return None
    screens = []
    for case in leftover:
        verdict.statistical_cases += 1
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
    :data:`STATISTICAL_SHRINK_TRIES` of those); an error stays an error (a timeout on a
    candidate is not one: the candidate is skipped), a deviation a deviation."""
    false_alarm = judge.verdict.false_alarm
    planned = 0
    results: dict[int, Finding] = {}

    def fails(case: Case) -> bool:
        nonlocal planned
        try:
            finding = judge.exact(case)
        except NotEnumerable:
            planned += 1
            if planned > STATISTICAL_SHRINK_TRIES:
                return False
            finding = judge.confirmed(case, false_alarm)
        if finding.timeout or (finding.kind == "error") != (failure.kind == "error"):
            return False
        results[id(case)] = finding
        return _failed(finding, false_alarm)

    minimal = shrink.shrink(failure.case, fails)
    found = results.get(id(minimal))
    if found is None:
        return failure
    return replace(found, case=shrink.relabelled(found.case, failure.case))


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
        for k in ("protocol", "scheme", "max_children", "rng")
        if getattr(obj, k, None) is not None
    }
    sampler = getattr(obj, "sampler", obj)
    if not callable(sampler):
        raise ValueError(f"sampler: {spec!r} is not callable")
    return sampler, declared


def replay(
    path: str | Path,
    sampler: observe.Sampler | None = None,
    name: str | None = None,
    *,
    declared: dict[str, str] | None = None,
    call_limit: float | None = DEFAULT_CALL_LIMIT,
    rng: str | None = None,
) -> Verdict:
    """Re-run a reproducer file's case (with its sampler, or ``sampler`` called ``name``);
    no shrinking. ``rng`` as :func:`referee` takes it (None: what the sampler declares).

    The reproducer fixes the protocol and the scheme (its case was drafted under them). A
    ``sampler`` declaring another protocol is refused; one declaring another scheme is run
    under the reproducer's, and the verdict's ``note`` says so (what it declares: its
    ``protocol`` / ``scheme`` attributes, or ``declared`` as :func:`load_sampler` gives it).
    A malformed file (not JSON, a missing field, a string where a number belongs, a case whose
    laws are not distributions) is refused with a ValueError naming the field.
    """
    try:
        data = json.loads(Path(path).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"replay: {path} is not JSON ({exc})") from None
    if not isinstance(data, dict) or "otlp_referee_reproducer" not in data:
        raise ValueError(f"replay: {path} is not an otlp referee reproducer")
    missing = [k for k in ("sampler", "protocol", "scheme", "finding") if k not in data]
    if missing or not isinstance(data["finding"], dict) or "case" not in data["finding"]:
        field_ = missing[0] if missing else "finding.case"
        raise ValueError(f"replay: {path} has no {field_!r} (a malformed reproducer)")
    if not isinstance(data["finding"]["case"], dict):
        raise ValueError(f"replay: {path}: 'finding.case' is not an object")
    case = case_from_json(data["finding"]["case"])
    settings: dict[str, float] = {}
    for key, default in (("epsilon", 0.01), ("false_alarm", 1e-6), ("miss", 1e-3)):
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ValueError(f"replay: {path}: {key!r} is {value!r}, not a number")
        settings[key] = float(value)
    protocol, scheme = data["protocol"], data["scheme"]
    if case.scheme != scheme or (
        "position" if isinstance(case, PositionCase) else "tree"
    ) != base_protocol(str(protocol)):
        raise ValueError(
            f"replay: {path}: its case is a {type(case).__name__} drafted {case.scheme}, "
            f"but the file says {protocol}, {scheme}"
        )
    note = ""
    if sampler is None:
        sampler, _ = load_sampler(str(data["sampler"]))
        name = str(data["sampler"])
    else:
        declared = declared or {}
        declared_protocol = declared.get("protocol", getattr(sampler, "protocol", None))
        if declared_protocol is not None and declared_protocol != protocol:
            raise ValueError(
                f"sampler: {name or _name_of(sampler)} declares the {declared_protocol} "
                f"protocol; the reproducer's case is a {protocol} case"
            )
        own = declared.get("scheme", getattr(sampler, "scheme", None))
        which = f"replayed under the reproducer's scheme {scheme}"
        note = which if own in (None, scheme) else f"{which} (the sampler declares {own})"
    verdict = referee(
        sampler,
        protocol=str(protocol),
        scheme=str(scheme),
        cases=[case],
        confirm=1,
        shrink_failures=False,
        name=name,
        call_limit=call_limit,
        rng=rng or (declared or {}).get("rng"),
        epsilon=settings["epsilon"],
        false_alarm=settings["false_alarm"],
        miss=settings["miss"],
    )
    verdict.note = "; ".join(n for n in (verdict.note, note) if n)
    return verdict


def assert_lossless(sampler: observe.Sampler, **options: Any) -> Verdict:
    """For pytest: :func:`referee` the sampler and fail with the verdict (the minimal case and
    its reproducer, written to ``options["reproducer"]`` if given) when it deviates."""
    verdict = referee(sampler, **options)
    if not verdict.lossless:
        case = json.dumps(verdict.failure.case.to_json()) if verdict.failure else ""
        raise AssertionError(f"{verdict.summary()}\n  case JSON: {case}")
    return verdict
