"""Every verification rule evaluated exactly on one instance, next to alpha*: the data model
behind ``otlp compare`` ([GR] Figure 1, [SpecHub] Figure 1).

:func:`evaluate` gives one :class:`Record` per rule on a :class:`Case` — its exact acceptance,
alpha* of the instance's own draft joint and of the rule's draft joint, the L1 distance of its
output law from p and KL(p || output) — and :func:`summarise` averages records over a suite's
items at each n (:class:`SummaryRow`). A lossless rule whose output is off p, or whose
acceptance exceeds its own alpha*, has ``Record.failed``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from otlp.instance import Instance
from otlp.rules.base import Rule
from otlp.rules.joints import KINDS
from otlp.rules.mentored import kl_divergence
from otlp.subset import optimal_acceptance

EXACT = 1e-9  # tolerance of the lossless and alpha* checks


@dataclass(frozen=True)
class Case:
    """One instance to compare the rules on."""

    suite: str
    item: str
    inst: Instance


@dataclass(frozen=True)
class Record:
    """One rule on one case; ``note`` says why a rule does not apply (values are then NaN)."""

    suite: str
    item: str
    n: int
    k: int
    scheme: str
    rule: str
    lossless: bool
    joint: str
    acceptance: float
    alpha_star: float
    alpha_star_own: float
    output_l1: float
    kl: float
    note: str = ""

    @property
    def failed(self) -> bool:
        """A lossless rule whose output is not p or whose acceptance beats its own alpha*."""
        if not self.lossless or self.note:
            return False
        return self.output_l1 > EXACT or self.acceptance > self.alpha_star_own + EXACT


def evaluate(case: Case, rules: Iterable[Rule]) -> list[Record]:
    """Exact acceptance, own alpha*, output error and KL(p || output) of each rule."""
    inst = case.inst
    alpha = optimal_acceptance(inst).alpha_star
    records = []
    for rule in rules:
        base = (case.suite, case.item, inst.n, inst.k, inst.scheme, rule.name, rule.lossless)
        try:
            joint = rule.draft_joint(inst).kind
            output = rule.output_distribution(inst)
            values = (
                rule.acceptance(inst),
                alpha,
                rule.alpha_star(inst),
                float(np.abs(output - inst.p).sum()),
                kl_divergence(inst.p, output),
            )
        except ValueError as exc:  # the rule does not apply here (e.g. SpecHub with n != 2)
            records.append(Record(*base, "", *(math.nan,) * 5, note=str(exc)))
            continue
        records.append(Record(*base, joint, *values))
    return records


@dataclass(frozen=True)
class SummaryRow:
    """Means over a suite's items at one n: alpha* of each draft joint the rules use and each
    rule's acceptance (NaN where a rule does not apply)."""

    suite: str
    n: int
    items: int
    scheme: str  # the instances' draft scheme (the OT rule's joint)
    bounds: dict[str, float]
    acceptance: dict[str, float]

    @property
    def label(self) -> str:
        return f"{self.suite} n={self.n}"


def summarise(records: list[Record]) -> list[SummaryRow]:
    """Mean own alpha* per joint kind and mean acceptance per rule for each (suite, n)."""
    groups: dict[tuple[str, int], list[Record]] = {}
    for r in records:
        groups.setdefault((r.suite, r.n), []).append(r)
    rows = []
    for (suite, n), group in groups.items():
        by_rule: dict[str, list[float]] = {}
        by_joint: dict[str, dict[str, float]] = {}
        for r in group:
            by_rule.setdefault(r.rule, []).append(r.acceptance)
            by_joint.setdefault(r.scheme, {})[r.item] = r.alpha_star
            if r.joint:
                by_joint.setdefault(r.joint, {})[r.item] = r.alpha_star_own
        bounds = {
            kind: float(np.mean(list(by_joint[kind].values())))
            for kind in KINDS
            if kind in by_joint
        }
        mean = {rule: float(np.mean(v)) for rule, v in by_rule.items()}
        items = len({r.item for r in group})
        rows.append(SummaryRow(suite, n, items, group[0].scheme, bounds, mean))
    return rows
