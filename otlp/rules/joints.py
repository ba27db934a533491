"""Draft joints the rules verify, over the instance's draft vocabulary (local ids).

Kinds:

* ``single`` — one draw from the first draft row (single-draft rules, [Musco]).
* ``iid`` — n i.i.d. draws from the first draft row (K-SEQ, SpecTr).
* ``independent`` — draw d from draft row d (recursive rejection sampling, SpecInfer).
* ``without_replacement`` — n distinct tokens drawn sequentially from the first draft row
  ([SpecHub] §3.3 and Algorithm 1).
* ``hub`` — SpecHub's sparse joint for n = 2 ([SpecHub] §4): with a = argmax q,
  Q(x, a) = q(x) and Q(a, x) = q(a) q(x) / (1 - q(a)) for x != a, zero elsewhere.

Each joint can be enumerated exactly (tuples in draw order with their masses), sampled
(vectorised) and asked for its own optimal acceptance alpha*.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from otlp import greedy
from otlp.columns import build_columns, log_tuple_mass, sequence_probability
from otlp.instance import Instance
from otlp.solvers.arrays import FloatArray, IntArray
from otlp.subset import optimal_acceptance

KINDS = ("single", "iid", "independent", "without_replacement", "hub", "greedy")


@dataclass(frozen=True)
class DraftJoint:
    """A draft joint over ``k`` local tokens; ``rows[d]`` is draw d's base distribution."""

    kind: str
    rows: FloatArray
    n: int

    @classmethod
    def of(cls, inst: Instance, kind: str) -> DraftJoint:
        """The joint of ``kind`` built from the instance's draft rows."""
        if kind not in KINDS:
            raise ValueError(f"kind: expected one of {KINDS}, got {kind!r}")
        base = np.asarray(inst.draft_rows)
        support = int(np.count_nonzero(base[0]))
        if kind == "single":
            return cls(kind, base[:1], 1)
        if kind == "independent" and inst.scheme == "independent":
            return cls(kind, base, inst.n)
        if kind == "independent":
            kind = "iid"  # equal rows: the independent joint is the i.i.d. one
        if kind in ("without_replacement", "greedy") and support < inst.n:
            raise ValueError(
                f"n: drawing {inst.n} distinct drafts needs {inst.n} draft tokens with positive "
                f"probability, the draft has {support}"
            )
        if kind == "hub" and inst.n != 2:
            raise ValueError(f"n: SpecHub's hub joint has two drafts, got n={inst.n}")
        return cls(kind, np.repeat(base[:1], inst.n, axis=0), inst.n)

    @property
    def q(self) -> FloatArray:
        """The first draw's distribution (the base distribution for wr and hub)."""
        return self.rows[0]

    @property
    def hub(self) -> int:
        """SpecHub's hub token a = argmax q (lowest local id on ties)."""
        return int(np.argmax(self.q))

    # ----- enumeration ---------------------------------------------------------------------
    def enumerate(self) -> tuple[IntArray, FloatArray]:
        """All draft tuples of positive probability (local ids, draw order) and their masses."""
        if self.kind == "hub":
            return self._hub_columns()
        if self.kind == "greedy":
            return greedy.tuples(self.q, self.n)
        scheme = "without_replacement" if self.kind == "without_replacement" else "independent"
        cols = build_columns("tuples", self.rows, self.n, scheme)
        keep = cols.mass > 0
        return cols.members[keep], cols.mass[keep]

    def _hub_columns(self) -> tuple[IntArray, FloatArray]:
        q, a = self.q, self.hub
        others = np.flatnonzero((q > 0) & (np.arange(q.shape[0]) != a))
        if others.size == 0:  # a one-hot draft: both drafts are the hub
            return np.array([[a, a]], dtype=np.int64), np.ones(1)
        hub = np.full(others.shape[0], a)
        members = np.vstack(
            [np.column_stack([others, hub]), np.column_stack([hub, others])]
        ).astype(np.int64)
        rest = q[others].sum()  # 1 - q(a), summed: 1 - q(a) cancels when q(a) is near 1
        mass = np.concatenate([q[others], q[a] * (q[others] / rest)])
        return members, mass

    # ----- sampling ------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator, size: int) -> IntArray:
        """``size`` draft tuples (local ids, draw order), shape (size, n)."""
        k = self.rows.shape[1]
        if self.kind == "without_replacement":
            with np.errstate(divide="ignore"):
                keys = np.log(self.q) + rng.gumbel(size=(size, k))
            return np.argsort(-keys, axis=1)[:, : self.n].astype(np.int64)
        if self.kind == "hub":
            members, mass = self._hub_columns()
            return members[rng.choice(mass.shape[0], size=size, p=mass / mass.sum())]
        if self.kind == "greedy":
            return greedy.sample_local(self.q, self.n, rng, size)
        return np.column_stack(
            [rng.choice(k, size=size, p=self.rows[d]) for d in range(self.n)]
        ).astype(np.int64)

    # ----- one drafted tuple -----------------------------------------------------------------
    def local_omega(self, inst: Instance, omega: ArrayLike) -> IntArray:
        """Validate drafted global ids and map them to local ids (first draft if single)."""
        arr = np.atleast_1d(np.asarray(omega))
        if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer) or arr.size == 0:
            raise ValueError(f"omega: expected a 1-D tuple of integer token ids, got {omega!r}")
        if self.kind == "single":
            arr = arr[:1]
        elif arr.shape[0] != self.n:
            raise ValueError(f"omega: expected {self.n} drafted token ids, got {arr.shape[0]}")
        order = np.argsort(inst.tokens)
        pos = np.clip(np.searchsorted(inst.tokens[order], arr), 0, inst.k - 1)
        if not np.all(inst.tokens[order][pos] == arr):
            raise ValueError("omega: contains a token the draft cannot produce")
        local = order[pos].astype(np.int64)
        if not self.possible(local):
            raise ValueError(f"omega: has zero probability under the {self.kind} draft joint")
        return local

    def possible(self, local: IntArray) -> bool:
        """Whether a drafted tuple (local ids, draw order) has positive probability, judged by
        the one rule for tuple masses (:func:`otlp.columns.log_tuple_mass`): a tuple whose
        mass underflows to 0 is still a draft."""
        if self.kind == "hub":
            return self.tuple_mass(local) > 0
        scheme = self.kind if self.kind in ("without_replacement", "greedy") else "independent"
        return bool(log_tuple_mass(self.rows, self.n, scheme, local[None, :])[0] > -np.inf)

    def tuple_mass(self, local: IntArray) -> float:
        """Probability of one drafted tuple of local ids (draw order)."""
        if self.kind == "hub":
            members, mass = self._hub_columns()
            hit = (members == local[None, :]).all(axis=1)
            return float(mass[hit].sum())
        if self.kind == "greedy":
            return float(greedy.tuple_mass(self.q, self.n, local[None, :])[0])
        if self.kind == "without_replacement":
            if np.unique(local).shape[0] != local.shape[0]:
                return 0.0
            return float(sequence_probability(self.q, local[None, :])[0])
        return float(np.prod(self.rows[np.arange(self.n), local]))

    # ----- the bound -----------------------------------------------------------------------
    def alpha_star(self, inst: Instance) -> float:
        """Optimal acceptance of this joint: subset selection ([GR] Theorem 3.1), or
        SpecHub's LP ([SpecHub] §3.2 and Theorem 1) for the hub joint."""
        if self.kind == "single":
            return float(np.minimum(inst.p_local, self.q).sum())
        if self.kind == "hub":
            return hub_lp_optimum(inst, self)
        return optimal_acceptance(_sibling(inst, self.kind)).alpha_star


def hub_lp_optimum(inst: Instance, joint: DraftJoint, backend: str = "highs") -> float:
    """SpecHub's simplified LP ([SpecHub] §3.2) over the hub joint, solved by ``backend``."""
    from otlp.builders import spechub_lp
    from otlp.solvers.registry import get_backend

    members, mass = joint.enumerate()
    lp = spechub_lp(inst.p_local, members, mass).lp
    result = get_backend(backend).solve(lp)
    if not result.success:
        raise RuntimeError(f"SpecHub LP: backend {backend!r} returned {result.raw_status!r}")
    return float(result.objective)


def _sibling(inst: Instance, scheme: str) -> Instance:
    """The instance itself, or the same (p, first draft row) under another draft scheme."""
    if scheme == inst.scheme:
        return inst
    q = np.zeros(inst.vocab_size)
    q[inst.tokens] = inst.q_local
    return Instance(inst.p, q, inst.n, scheme, renormalize=True)
