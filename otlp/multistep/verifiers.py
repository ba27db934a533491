"""Single-step verifiers for tree traversal (SpecTr-style; seed 000, Appendix R).

A single-step verifier is any callable ``(target_probs, draft_probs, n, drafted) -> law``:
given the next-token target law p, the draft law q, the number n of i.i.d. drafts and the
drafted n-tuple omega (token ids), it returns the law pi(. | omega) of the output token over
the whole vocabulary. It is lossless when sum_omega q^n(omega) pi(. | omega) = p.

:class:`PlanVerifier` turns any :func:`otlp.solve` method into one ("maxflow" = the optimal
transport plan of seed 000 §2, "global_resolution" once registered) and caches the verified
plan of each (p, q, n). :func:`get_verifier` looks verifiers up by name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from otlp.api import solve
from otlp.instance import Instance
from otlp.methods import method_names
from otlp.plan import TransportPlan
from otlp.verify import Tolerances

FloatArray = NDArray[np.float64]
SingleStepVerifier = Callable[[FloatArray, FloatArray, int, Sequence[int]], FloatArray]


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
        key = (np.asarray(target_probs).tobytes(), np.asarray(draft_probs).tobytes(), n)
        if key not in self._plans:
            inst = Instance(target_probs, draft_probs, n, renormalize=True)
            self._plans[key] = solve(
                inst, self.method, strict=True, tolerances=self.tolerances, **self.options
            )
        return self._plans[key]

    def __call__(
        self, target_probs: FloatArray, draft_probs: FloatArray, n: int, drafted: Sequence[int]
    ) -> FloatArray:
        return self.plan(target_probs, draft_probs, n).slice(np.asarray(drafted, dtype=np.int64))

    def __repr__(self) -> str:
        return f"PlanVerifier({self.method!r})"


def get_verifier(name: str | SingleStepVerifier = "ot", **options: Any) -> SingleStepVerifier:
    """A single-step verifier by name: ``"ot"`` (max-flow optimal transport) or any
    :func:`otlp.method_names` entry (options go to :class:`PlanVerifier`); a callable is
    returned unchanged."""
    if callable(name):
        return name
    if name == "ot":
        return PlanVerifier("maxflow", **options)
    if name in method_names():
        return PlanVerifier(name, **options)
    raise ValueError(f"rule: unknown single-step verifier {name!r}; known: ot, {method_names()}")
