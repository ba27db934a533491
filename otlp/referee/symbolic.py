"""Exact output laws of a sampler by branching its random source (the referee's exact mode).

A sampler's randomness comes from the ``rng`` it is handed. :class:`BranchingGenerator` stands
in for a ``numpy.random.Generator`` and lets the referee enumerate every outcome of the
sampler with its exact probability, by depth-first replay:

* ``random()`` / ``uniform(low, high)`` return a :class:`SymbolicUniform` ``a·U + b`` with
  ``U ~ U(0, 1)``; comparing it with a number splits U's current interval at the threshold,
  and both sides are explored, each weighted by its share of the interval. Arithmetic with
  numbers (``+ - * /``, negation) keeps it affine.
* ``choice(a, p=...)``, ``choice(a)`` and ``integers(low, high)`` branch once per outcome with
  its probability (numpy's own rule: ``p`` is normalised by its sum); ``permutation`` and
  ``shuffle`` are not followed. A draw with more than :data:`MAX_OUTCOMES` outcomes of
  positive probability (``integers(2**31)`` to seed another generator, say) is not followed:
  it raises before anything of its size is allocated.
* Anything else — converting a symbolic uniform to a float, numpy ufuncs on it (``np.log``,
  ``np.minimum``), the other distributions — raises :class:`NotEnumerable`, and the referee
  falls back to its statistical mode. So does an error whose message names the stand-ins
  (a library refusing anything but a ``numpy.random.Generator``): it is the referee's limit,
  not the sampler's failure on a valid input.

Each run of the sampler follows one script of branch choices; a run's probability is the
product of its choices' probabilities. After a run, the next script is the deepest choice
with an untried alternative, so the runs enumerate the branch tree once each (a sampler must
be deterministic given its random draws: the first run and every :data:`REPLAYED`-th are
run twice and must agree, and must leave the global generators of Python, numpy and torch
untouched). The probabilities of all runs sum to 1 up
to rounding; :func:`exact_law` checks that.
"""

from __future__ import annotations

import math
import numbers
import operator
import random
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAX_RUNS = 20_000  # runs per enumeration before it is declared not enumerable
# Branch points in one run. A loop of draws with no bound (rejection sampling) makes the
# depth-first replay go one level deeper per run, so its cost grows as the square of this
# bound: at 256 the exact mode gives up on such a sampler within a second or two (at 10,000 it
# spent the 60 s budget of a case, case after case); the samplers of the test suite decide at
# most 5 times a call.
MAX_CHOICES = 256
MAX_OUTCOMES = 4096  # outcomes of positive probability of one draw
SUM_TOL = math.sqrt(np.finfo(np.float64).eps)  # numpy's tolerance on choice's p
MASS_TOL = 1e-9  # the runs' total probability must be 1 to this
REPLAYED = 16  # the first run and every 16th are replayed to catch randomness of its own
# An error whose message names the stand-ins comes from code refusing them (a library that
# checks for a numpy Generator), not from the sampler on a valid input
_STAND_INS = re.compile(r"\b(BranchingGenerator|SymbolicUniform)\b")


class NotEnumerable(Exception):
    """The exact mode cannot follow a sampler; the referee judges it statistically instead.

    Raised by the branching generator (a float conversion, a numpy function on a symbolic
    draw, a distribution it does not branch, a draw with more than :data:`MAX_OUTCOMES`
    outcomes, more than :data:`MAX_RUNS` branches) or by a sampler itself (an adapter that
    knows its rule is not exact raises it on purpose). ``case_only`` is True when only the
    case is too large to enumerate (too many drafted tuples, a replay budget spent): the
    referee still tries the exact mode on the next case; otherwise the sampler is judged
    statistically from then on.
    """

    def __init__(self, reason: str, *, case_only: bool = False) -> None:
        super().__init__(reason)
        self.case_only = case_only


@dataclass
class _Choice:
    """One branch point of a run: the option taken and the probabilities of all options."""

    taken: int
    probs: list[float]


@dataclass
class _Run:
    """The state of one replay: the script to follow and the choices met so far."""

    script: list[int]
    choices: list[_Choice] = field(default_factory=list)
    intervals: list[list[float]] = field(default_factory=list)  # [lo, hi) per uniform

    def branch(self, probs: list[float]) -> int:
        """Take the scripted option (the first of positive probability when unscripted)."""
        if len(self.choices) >= MAX_CHOICES:
            raise NotEnumerable(
                f"more than {MAX_CHOICES:,} random decisions in one call (a loop of draws "
                "without a bound, rejection sampling say)"
            )
        depth = len(self.choices)
        if depth < len(self.script):
            taken = self.script[depth]
        else:
            taken = next(i for i, w in enumerate(probs) if w > 0)
        self.choices.append(_Choice(taken, probs))
        return taken

    def probability(self) -> float:
        prob = 1.0
        for choice in self.choices:
            prob *= choice.probs[choice.taken]
        return prob

    def next_script(self) -> list[int] | None:
        """The script of the next run in depth-first order; None when all were run."""
        for depth in range(len(self.choices) - 1, -1, -1):
            choice = self.choices[depth]
            later = [i for i in range(choice.taken + 1, len(choice.probs)) if choice.probs[i] > 0]
            if later:
                return [c.taken for c in self.choices[:depth]] + [later[0]]
        return None


def _real(value: object) -> float:
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise NotEnumerable(f"a symbolic uniform met {type(value).__name__} {value!r}")
    return float(value)


class SymbolicUniform:
    """``scale · U + shift`` for one uniform U of a :class:`BranchingGenerator`'s run."""

    __array_ufunc__ = None  # numpy defers to the reflected operators, ufuncs raise TypeError

    def __init__(self, run: _Run, index: int, scale: float = 1.0, shift: float = 0.0) -> None:
        self._run, self._index, self._scale, self._shift = run, index, scale, shift

    def _affine(self, scale: float, shift: float) -> SymbolicUniform:
        if not (math.isfinite(scale) and math.isfinite(shift)):
            raise NotEnumerable("a symbolic uniform scaled or shifted by inf or nan")
        return SymbolicUniform(self._run, self._index, scale, shift)

    def __add__(self, other: object) -> SymbolicUniform:
        return self._affine(self._scale, self._shift + _real(other))

    __radd__ = __add__

    def __sub__(self, other: object) -> SymbolicUniform:
        return self._affine(self._scale, self._shift - _real(other))

    def __rsub__(self, other: object) -> SymbolicUniform:
        return self._affine(-self._scale, _real(other) - self._shift)

    def __mul__(self, other: object) -> SymbolicUniform:
        c = _real(other)
        return self._affine(self._scale * c, self._shift * c)

    __rmul__ = __mul__

    def __truediv__(self, other: object) -> SymbolicUniform:
        c = _real(other)
        if c == 0:  # numpy would give inf or nan here: not followed
            raise NotEnumerable("a symbolic uniform divided by zero")
        return self._affine(self._scale / c, self._shift / c)

    def __neg__(self) -> SymbolicUniform:
        return self._affine(-self._scale, -self._shift)

    def __pos__(self) -> SymbolicUniform:
        return self

    def _below(self, threshold: float, strict: bool) -> bool:
        """Whether ``scale · U + shift < threshold`` (``<=`` if not strict), by branching."""
        if self._scale == 0:
            return self._shift < threshold if strict else self._shift <= threshold
        cut = (threshold - self._shift) / self._scale
        lo, hi = self._run.intervals[self._index]
        if self._scale > 0:  # the event is U < cut
            if cut <= lo:
                return False
            if cut >= hi:
                return True
            below = self._run.branch([(cut - lo) / (hi - lo), (hi - cut) / (hi - lo)]) == 0
            self._run.intervals[self._index] = [lo, cut] if below else [cut, hi]
            return below
        if cut >= hi:  # negative scale: the event is U > cut
            return False
        if cut <= lo:
            return True
        above = self._run.branch([(hi - cut) / (hi - lo), (cut - lo) / (hi - lo)]) == 0
        self._run.intervals[self._index] = [cut, hi] if above else [lo, cut]
        return above

    # A comparison with nan is False either way, as in IEEE arithmetic.
    def __lt__(self, other: object) -> bool:
        t = _real(other)
        return not math.isnan(t) and self._below(t, strict=True)

    def __le__(self, other: object) -> bool:
        t = _real(other)
        return not math.isnan(t) and self._below(t, strict=False)

    def __gt__(self, other: object) -> bool:
        t = _real(other)
        return not math.isnan(t) and not self._below(t, strict=False)

    def __ge__(self, other: object) -> bool:
        t = _real(other)
        return not math.isnan(t) and not self._below(t, strict=True)

    def __eq__(self, other: object) -> bool:
        raise NotEnumerable("equality test on a symbolic uniform")

    def __hash__(self) -> int:
        return id(self)

    def __float__(self) -> float:
        raise NotEnumerable("a symbolic uniform was converted to a float")

    def __bool__(self) -> bool:
        raise NotEnumerable("a symbolic uniform was used as a truth value")

    def __repr__(self) -> str:
        return f"SymbolicUniform({self._scale!r} * U{self._index} + {self._shift!r})"


def _size_count(size: object) -> int | None:
    if size is None:
        return None
    return int(np.empty(size, dtype=np.bool_).size)  # type: ignore[call-overload]


def _bounded(outcomes: int) -> None:
    """Refuse (before allocating anything of its size) a draw with too many outcomes."""
    if outcomes > MAX_OUTCOMES:
        raise NotEnumerable(
            f"a draw with {outcomes:,} outcomes (more than {MAX_OUTCOMES:,}, e.g. a seed "
            "for another generator)"
        )


class BranchingGenerator:
    """A stand-in for ``numpy.random.Generator`` whose draws branch the sampler's run."""

    def __init__(self, run: _Run) -> None:
        self._run = run

    def _uniform(self) -> SymbolicUniform:
        self._run.intervals.append([0.0, 1.0])
        return SymbolicUniform(self._run, len(self._run.intervals) - 1)

    def random(self, size: object = None, dtype: object = None, out: object = None) -> Any:
        if out is not None or dtype not in (None, np.float64, float, "float64", "d"):
            raise NotEnumerable("Generator.random with dtype or out")
        if size is None:
            return self._uniform()
        values = np.empty(size, dtype=object)  # type: ignore[call-overload]
        for index in np.ndindex(values.shape):
            values[index] = self._uniform()
        return values

    def uniform(self, low: object = 0.0, high: object = 1.0, size: object = None) -> Any:
        lo, hi = _real(low), _real(high)
        if size is not None:
            return np.array([lo + (hi - lo) * u for u in self.random(_size_count(size))])
        return lo + (hi - lo) * self._uniform()

    def integers(
        self,
        low: object,
        high: object = None,
        size: object = None,
        dtype: object = np.int64,
        endpoint: bool = False,
    ) -> Any:
        lo, hi = (0, int(low)) if high is None else (int(low), int(high))  # type: ignore[call-overload]
        if endpoint:
            hi += 1
        if hi <= lo:
            raise ValueError("high <= low")
        _bounded(hi - lo)
        count = _size_count(size)
        draws = [lo + self._run.branch([1.0 / (hi - lo)] * (hi - lo)) for _ in range(count or 1)]
        return np.int64(draws[0]) if count is None else np.array(draws, dtype=np.int64)

    def choice(
        self,
        a: object,
        size: object = None,
        replace: bool = True,
        p: object = None,
        axis: int = 0,
        shuffle: bool = True,
    ) -> Any:
        if isinstance(a, numbers.Integral) and p is None:
            _bounded(int(a))
        population = np.arange(int(a)) if isinstance(a, numbers.Integral) else np.asarray(a)
        if population.ndim != 1 or population.shape[0] == 0 or axis != 0:
            raise NotEnumerable("Generator.choice on an empty or multidimensional population")
        weights = self._weights(population.shape[0], p)
        _bounded(int(np.count_nonzero(weights)))
        count = _size_count(size)
        picks = []
        for _ in range(count or 1):
            total = float(np.sum(weights))
            if total <= 0:
                raise ValueError("Fewer non-zero entries in p than size")
            index = self._run.branch((weights / total).tolist())
            picks.append(population[index])
            if not replace:
                weights = weights.copy()
                weights[index] = 0.0
        if count is None:
            return picks[0]
        return np.array(picks).reshape(np.empty(size).shape)  # type: ignore[call-overload]

    @staticmethod
    def _weights(count: int, p: object) -> np.ndarray:
        if p is None:
            return np.full(count, 1.0 / count)
        weights = np.asarray(p, dtype=np.float64)
        if weights.shape != (count,):
            raise ValueError("a and p must have same size")
        total = float(weights.sum())
        if not weights.min() >= 0 or not math.isfinite(total):  # NaN fails the first test
            raise ValueError("probabilities are not non-negative")
        if abs(total - 1.0) > SUM_TOL:
            raise ValueError("probabilities do not sum to 1")
        return weights

    def __getattr__(self, name: str) -> Any:
        raise NotEnumerable(f"Generator.{name} is not followed by the exact mode")


def _replay(
    sampler: Callable[[BranchingGenerator], object], script: list[int], key: Callable[[Any], Any]
) -> tuple[_Run, Any]:
    run = _Run(script)
    try:
        out = key(sampler(BranchingGenerator(run)))
    except NotEnumerable:
        raise
    except (TypeError, AttributeError) as exc:  # numpy or arithmetic on a symbolic draw
        raise NotEnumerable(f"{type(exc).__name__}: {exc}") from exc
    except Exception as exc:
        if _STAND_INS.search(str(exc)):  # a library refusing the stand-in (not a Generator)
            said = re.sub(r" at 0x[0-9a-fA-F]+", "", str(exc))
            raise NotEnumerable(f"{type(exc).__name__}: {said}") from exc
        raise
    if len(run.choices) < len(script):
        raise NotEnumerable("the sampler is not deterministic given its random draws")
    return run, out


class ReplayBudget:
    """What one case's enumeration may spend, over all its drafted tuples or trees: ``runs``
    replays of the sampler and ``seconds`` of wall clock. Spent, it raises
    :class:`NotEnumerable` with ``case_only`` (the case is too large to follow, not the
    sampler), so the exact mode gives up within bounded time."""

    def __init__(self, runs: int, seconds: float) -> None:
        self.runs, self.seconds = runs, seconds
        self.left = runs
        self.deadline = time.monotonic() + seconds

    def spend(self) -> None:
        """One replay; NotEnumerable once the runs or the time are spent."""
        self.left -= 1
        if self.left < 0:
            raise NotEnumerable(
                f"replay budget of {self.runs:,} runs for one case exceeded", case_only=True
            )
        if time.monotonic() > self.deadline:
            raise NotEnumerable(
                f"replay budget of {self.seconds:g} s for one case exceeded", case_only=True
            )


def _global_states() -> dict[str, Any]:
    """The states of the global generators a sampler may draw from behind the referee's back:
    Python's ``random``, numpy's legacy ``np.random`` and, where it is imported, torch's CPU
    generator. A draw from one of them changes its state; the replays alone would miss it
    whenever the hidden draws happen to repeat their outcome."""
    legacy = np.random.get_state(legacy=False)  # noqa: NPY002 (reading it, not drawing)
    states: dict[str, Any] = {
        "Python's random": random.getstate(),
        "numpy.random": (legacy["state"]["key"].tobytes(), legacy["state"]["pos"]),
    }
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "random"):
        states["torch"] = torch.random.get_rng_state().numpy().tobytes()
    return states


def exact_law(
    sampler: Callable[[BranchingGenerator], object],
    *,
    key: Callable[[Any], Any] = operator.index,
    max_runs: int = MAX_RUNS,
    budget: ReplayBudget | None = None,
) -> dict[Any, float]:
    """The exact law of ``key(sampler(rng))`` over the branching generator's runs.

    ``sampler`` gets a fresh :class:`BranchingGenerator` per run. Raises
    :class:`NotEnumerable` when the sampler does what the generator cannot follow, needs more
    than ``max_runs`` runs, spends the case's ``budget``, or its runs' probabilities do not
    sum to 1 (a sampler that is not deterministic given its draws).
    """
    law: dict[Any, float] = {}
    script: list[int] | None = []
    runs = 0
    while script is not None:
        runs += 1
        if runs > max_runs:
            raise NotEnumerable(f"more than {max_runs:,} branches in one call")
        if budget is not None:
            budget.spend()
        checked = runs == 1 or runs % REPLAYED == 0  # a sampler with randomness of its own
        before = _global_states() if checked else {}
        run, out = _replay(sampler, script, key)
        if checked:
            moved = [name for name, state in _global_states().items() if before.get(name) != state]
            if moved:
                raise NotEnumerable(
                    f"the sampler draws from a global generator ({moved[0]}), not from the rng "
                    "it is handed"
                )
            again, out_again = _replay(sampler, script, key)
            taken = [c.taken for c in again.choices] != [c.taken for c in run.choices]
            if taken or out_again != out:
                raise NotEnumerable("the sampler is not deterministic given its random draws")
        law[out] = law.get(out, 0.0) + run.probability()
        script = run.next_script()
    total = sum(law.values())
    if not abs(total - 1.0) <= MASS_TOL:  # nan fails too
        raise NotEnumerable(f"the branches' probabilities sum to {total!r}, not 1")
    return law


def tree_key(value: Any) -> tuple[tuple[int, ...], int]:
    """A tree sampler's ``(nodes, bonus)`` output as a hashable ``(nodes tuple, bonus)``."""
    nodes, bonus = value
    return tuple(operator.index(v) for v in nodes), operator.index(bonus)
