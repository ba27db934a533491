"""The registry of theory checks: each a named statement from a paper with a function that
tests it on one seeded random instance (or on one suite item) and returns a signed margin.

A margin is measured in the statement's own units and signed so that ``margin < 0`` means the
statement is violated on that instance (tolerances for rounding are already subtracted).
A check marked ``expect_fail`` registers a statement *as printed in a paper* that is known to be
wrong: ``otlp validate`` reports it as refuted when some instance violates it, and flags it if
every instance passes (a printed error that no longer shows is itself worth a look).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from otlp.instance import Instance
from otlp.instances.suites import SuiteItem
from otlp.solvers.arrays import FloatArray


@dataclass(frozen=True)
class Outcome:
    """One instance's result: ``margin`` (< 0: violated) and the numbers behind it."""

    margin: float
    values: dict[str, float] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return bool(self.margin >= 0)


def equality(a: float, b: float, tol: float = 1e-9, **values: float) -> Outcome:
    """Outcome of the claim ``a == b`` within ``tol``: margin = tol - |a - b|."""
    return Outcome(tol - abs(float(a) - float(b)), {"lhs": float(a), "rhs": float(b), **values})


def at_most(a: float, b: float, tol: float = 1e-9, **values: float) -> Outcome:
    """Outcome of the claim ``a <= b`` (within ``tol``): margin = b + tol - a."""
    return Outcome(float(b) + tol - float(a), {"lhs": float(a), "rhs": float(b), **values})


class Case:
    """The randomness and (optionally) the suite item one check instance runs on.

    Checks draw their inputs through :meth:`pair` and :meth:`instance`; whatever they draw is
    recorded in ``self.recorded`` so the worst instance of a run can be saved and replayed.
    """

    def __init__(self, rng: np.random.Generator, item: SuiteItem | None = None) -> None:
        self.rng = rng
        self.item = item
        self.recorded: dict[str, Any] = {}
        if item is not None:
            self.recorded["suite_item"] = item.name

    def record(self, **values: Any) -> None:
        for key, value in values.items():
            self.recorded[key] = value.tolist() if isinstance(value, np.ndarray) else value

    def vector(self, size: int, degenerate: bool = True) -> FloatArray:
        """A random probability vector: Dirichlet, or (if ``degenerate``) sometimes small
        integer weights with zeros and ties, sometimes with one 1e-12 entry."""
        rng = self.rng
        if degenerate and rng.random() < 0.4:
            w = rng.integers(0, 5, size).astype(float)
            if w.sum() == 0:
                w[rng.integers(size)] = 1.0
            if rng.random() < 0.3:
                i = int(rng.integers(size))
                if w[i] > 0:
                    w[i] = 1e-12 * w.sum()
        else:
            w = rng.dirichlet(np.full(size, rng.choice([0.2, 0.5, 1.0, 3.0])))
        return w / w.sum()

    def pair(self, max_vocab: int = 6, min_vocab: int = 2, degenerate: bool = True):
        """(p, q): random, or the suite item's top tokens of q (up to ``max_vocab - 1``) plus one
        aggregated token holding the rest of both distributions."""
        if self.item is not None:
            p, q = reduce_pair(self.item.p, self.item.q, max_vocab)
        else:
            vocab = int(self.rng.integers(min_vocab, max_vocab + 1))
            p, q = self.vector(vocab, degenerate), self.vector(vocab, degenerate)
            if degenerate and self.rng.random() < 0.1:
                q = p.copy()
        self.record(p=p, q=q)
        return p, q

    def instance(
        self,
        schemes: tuple[str, ...] = ("iid",),
        max_vocab: int = 6,
        max_n: int = 3,
        min_n: int = 1,
        degenerate: bool = True,
        top_k: bool = True,
    ) -> Instance:
        """A small random instance of one of ``schemes`` (suite items give p, q)."""
        rng = self.rng
        scheme = str(rng.choice(list(schemes)))
        n = int(rng.integers(min_n, max_n + 1))
        if scheme == "independent":
            p, q0 = self.pair(max_vocab, degenerate=degenerate)
            q = [q0] + [self.vector(p.shape[0], degenerate) for _ in range(n - 1)]
        else:
            p, q = self.pair(max_vocab, degenerate=degenerate)
        if scheme in ("without_replacement", "greedy"):
            n = max(1, min(n, int(np.count_nonzero(q))))
        smallest = n if scheme in ("without_replacement", "greedy") else 1
        k = None
        if top_k and rng.random() < 0.3 and p.shape[0] > smallest:
            k = int(rng.integers(smallest, p.shape[0] + 1))
        self.record(q=np.asarray(q), n=n, scheme=scheme, top_k=k)
        return Instance(p, q, n, scheme, k, renormalize=True)


def reduce_pair(p: FloatArray, q: FloatArray, max_vocab: int) -> tuple[FloatArray, FloatArray]:
    """The top ``max_vocab - 1`` draft tokens of (p, q) plus one token for all the rest."""
    p, q = np.asarray(p, float), np.asarray(q, float)
    keep = np.argsort(-q, kind="stable")[: max(1, max_vocab - 1)]
    rest = np.ones(p.shape[0], dtype=bool)
    rest[keep] = False
    p_small = np.append(p[keep], p[rest].sum())
    q_small = np.append(q[keep], q[rest].sum())
    return p_small / p_small.sum(), q_small / q_small.sum()


@dataclass(frozen=True)
class Check:
    """A named statement with its paper key, section and test function."""

    name: str
    paper: str
    section: str
    statement: str
    func: Callable[[Case], Outcome]
    expect_fail: bool = False
    cost: float = 1.0  # instances relative to the requested count (slow checks < 1)
    suite: bool = True  # whether a suite item can stand in for the random pair


_CHECKS: dict[str, Check] = {}


def check(
    name: str,
    paper: str,
    section: str,
    statement: str,
    *,
    expect_fail: bool = False,
    cost: float = 1.0,
    suite: bool = True,
) -> Callable[[Callable[[Case], Outcome]], Callable[[Case], Outcome]]:
    """Decorator registering a check function under ``name``."""

    def wrap(func: Callable[[Case], Outcome]) -> Callable[[Case], Outcome]:
        if name in _CHECKS:
            raise ValueError(f"name: check {name!r} is registered twice")
        _CHECKS[name] = Check(name, paper, section, statement, func, expect_fail, cost, suite)
        return func

    return wrap


def checks() -> dict[str, Check]:
    """Every registered check by name (importing otlp.validate registers them all)."""
    return dict(_CHECKS)


def get(name: str) -> Check:
    """The registered check called ``name`` (``ValueError`` naming ``name`` if none is)."""
    if name not in _CHECKS:
        raise ValueError(f"name: unknown check {name!r}; see otlp.validate.checks()")
    return _CHECKS[name]
