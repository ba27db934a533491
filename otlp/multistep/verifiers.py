"""Single-step verifiers for tree traversal (SpecTr-style; [GR] Appendix R).

A single-step verifier is any callable ``(target_probs, draft_probs, n, drafted) -> law``:
given the next-token target law p, the draft law q, the number n of i.i.d. drafts and the
drafted n-tuple omega (token ids), it returns the law pi(. | omega) of the output token over
the whole vocabulary. It is lossless when sum_omega q^n(omega) pi(. | omega) = p.

Adapters (:func:`get_verifier` looks them up by name):

* :class:`RuleVerifier` — a rule of :mod:`otlp.rules` ("ot", "kseq", "rrs", "sps", ...),
  through its exact ``conditional(inst, omega)``; only rules that verify i.i.d. drafts (or
  the first draft) fit, since the children of a draft-tree node are i.i.d.;
* :class:`PlanVerifier` — any :func:`otlp.solve` method ("maxflow", "global_resolution",
  ...), through the verified plan's ``slice(omega)``.

Both cache per (p, q, n), so a node law seen again (Markov models) costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from otlp import rules
from otlp.api import solve
from otlp.args import canonical_name
from otlp.instance import Instance
from otlp.methods import method_names
from otlp.plan import TransportPlan
from otlp.solvers.arrays import FloatArray
from otlp.verify import Tolerances

Drafted = Sequence[int] | NDArray[np.int64]
SingleStepVerifier = Callable[[FloatArray, FloatArray, int, Drafted], FloatArray]
IID_JOINTS = ("single", "iid", "independent", "instance")


def _key(target_probs: FloatArray, draft_probs: FloatArray, n: int) -> tuple[bytes, bytes, int]:
    return np.asarray(target_probs).tobytes(), np.asarray(draft_probs).tobytes(), n


class RuleVerifier:
    """pi(. | omega) = ``rule.conditional(Instance(p, q, n), omega)`` for an otlp.rules rule."""

    def __init__(self, rule: rules.Rule) -> None:
        if rule.joint_kind not in IID_JOINTS:
            raise ValueError(
                f"rule: {rule.name!r} verifies a {rule.joint_kind!r} draft joint, but the "
                "children of a draft-tree node are i.i.d."
            )
        self.rule = rule
        self._instances: dict[tuple[bytes, bytes, int], Instance] = {}

    def __call__(
        self, target_probs: FloatArray, draft_probs: FloatArray, n: int, drafted: Drafted
    ) -> FloatArray:
        key = _key(target_probs, draft_probs, n)
        if key not in self._instances:  # the rule memoises its work per live instance
            self._instances[key] = Instance(target_probs, draft_probs, n, renormalize=True)
        return self.rule.conditional(self._instances[key], np.asarray(drafted, dtype=np.int64))

    def __repr__(self) -> str:
        return f"RuleVerifier({self.rule.name!r})"


class PlanVerifier:
    """pi(. | omega) = ``otlp.solve(Instance(p, q, n), method).slice(omega)``, plans cached.

    Every plan passes the verifier (``strict=True``); ``tolerances`` relaxes it for
    approximate methods (e.g. ``Tolerances.global_resolution(tau)``).
    """

    def __init__(
        self,
        method: str = "maxflow",
        *,
        tolerances: Tolerances | None = None,
        **options: Any,
    ) -> None:
        if method not in method_names():
            raise ValueError(f"method: unknown {method!r}; known: {', '.join(method_names())}")
        self.method = method
        self.tolerances = tolerances
        self.options = options
        self._plans: dict[tuple[bytes, bytes, int], TransportPlan] = {}

    def plan(self, target_probs: FloatArray, draft_probs: FloatArray, n: int) -> TransportPlan:
        """The verified plan of (p, q, n), solved once."""
        key = _key(target_probs, draft_probs, n)
        if key not in self._plans:
            inst = Instance(target_probs, draft_probs, n, renormalize=True)
            self._plans[key] = solve(
                inst, self.method, strict=True, tolerances=self.tolerances, **self.options
            )
        return self._plans[key]

    def __call__(
        self, target_probs: FloatArray, draft_probs: FloatArray, n: int, drafted: Drafted
    ) -> FloatArray:
        return self.plan(target_probs, draft_probs, n).slice(np.asarray(drafted, dtype=np.int64))

    def __repr__(self) -> str:
        return f"PlanVerifier({self.method!r})"


def get_verifier(rule: str | SingleStepVerifier = "ot", **options: Any) -> SingleStepVerifier:
    """A single-step verifier: a rule name of :func:`otlp.rules.names` ("ot" is the max-flow
    optimal transport), else a method of :func:`otlp.method_names`; ``options`` go to the
    rule or to :class:`PlanVerifier`. A callable is returned unchanged."""
    if callable(rule):
        return rule
    name = canonical_name(rule, "rule")
    if name in rules.names():
        return RuleVerifier(rules.get(name, **options))
    if name in method_names():
        return PlanVerifier(name, **options)
    known = ", ".join([*rules.names(), *method_names()])
    raise ValueError(f"rule: unknown single-step verifier {name!r}; known: {known}")
