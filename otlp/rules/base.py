"""The verification-rule interface and the exact bookkeeping every rule shares.

A rule works over the *extended draft vocabulary*: the k draft tokens of the instance
(``inst.tokens``) plus one aggregated "outside" state for the target mass the draft cannot
produce ([GR] Appendix N). The draft never proposes the outside state, so every rule's
output given the drafts spreads that state over the outside tokens in proportion to p; the
aggregation is exact for all rules here. Distributions over the extended vocabulary have
length ``k + 1`` with the outside state last; global vectors are produced only at the API
boundary (:meth:`Rule.output_distribution`, :meth:`Rule.conditional`, :meth:`Rule.sample`).

Acceptance is the OTLP objective of the coupling the rule induces ([GR] Eq. 1):
``P(output token in set(omega))`` under the rule's own draft joint, computed exactly.
"""

from __future__ import annotations

import functools
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otlp.args import as_generator, positive_int
from otlp.instance import Instance, require_instance
from otlp.limits import check_size
from otlp.rules.joints import DraftJoint
from otlp.solvers.arrays import FloatArray, IntArray

T = TypeVar("T")
TINY = 1e-300


# ----- small exact helpers shared by the rules -------------------------------------------------
def draft_ext(row: FloatArray) -> FloatArray:
    """A draft distribution over the draft vocabulary, extended by a zero outside state."""
    return np.append(row, 0.0)


def ratio_accept(p: FloatArray, q: FloatArray) -> FloatArray:
    """min(1, p / q) elementwise (1 where q = 0: such tokens are never drafted)."""
    safe = np.where(q > 0, q, 1.0)
    with np.errstate(over="ignore"):  # p / subnormal q overflows to inf: min gives 1
        return np.where(q > 0, np.minimum(1.0, p / safe), 1.0)


def residual(p: FloatArray, q: FloatArray, fallback: FloatArray | None = None) -> FloatArray:
    """norm(max(p - q, 0)) along the last axis; rows with nothing left get ``fallback``
    (default p), which must be a distribution.

    Nothing is left exactly when the rule never reaches its residual draw; rounding can still
    leave that draw a tiny probability (SpecHub's hub step with q(a) = 1 - 1e-12 reached it
    with probability 2.2e-5 on a draft pair of mass 1e-12), so the fallback keeps every
    conditional a distribution instead of losing that share.
    """
    left = np.maximum(p - q, 0.0)
    total = left.sum(axis=-1, keepdims=True)
    rest = p if fallback is None else fallback
    return np.where(total > TINY, left / np.where(total > TINY, total, 1.0), rest)


def distinct_mask(members: IntArray) -> NDArray[np.bool_]:
    """For rows of drafted local ids (-1 = padding), the first occurrence of each real token."""
    order = np.argsort(members, axis=1, kind="stable")
    ranked = np.take_along_axis(members, order, axis=1)
    first = np.ones_like(ranked, dtype=bool)
    first[:, 1:] = ranked[:, 1:] != ranked[:, :-1]
    first &= ranked >= 0
    mask = np.zeros_like(first)
    np.put_along_axis(mask, order, first, axis=1)
    return mask


def sample_rows(rng: np.random.Generator, probs: FloatArray) -> IntArray:
    """One categorical draw per row of ``probs`` (rows need not be normalised), vectorised."""
    cum = np.cumsum(probs, axis=1)
    u = rng.random(probs.shape[0]) * cum[:, -1]
    return np.minimum((cum <= u[:, None]).sum(axis=1), probs.shape[1] - 1).astype(np.int64)


def _outside_tokens(inst: Instance) -> IntArray:
    mask = inst.p > 0
    mask[inst.tokens] = False
    return np.flatnonzero(mask)


def local_to_tokens(inst: Instance, local: IntArray, rng: np.random.Generator) -> IntArray:
    """Extended-vocabulary outputs -> global token ids (the outside state drawn from p)."""
    out = np.empty(local.shape[0], dtype=np.int64)
    inside = local < inst.k
    out[inside] = inst.tokens[local[inside]]
    if not inside.all():
        outside = _outside_tokens(inst)
        cdf = np.cumsum(inst.p[outside])
        u = rng.random(int((~inside).sum())) * cdf[-1]
        out[~inside] = outside[np.minimum(np.searchsorted(cdf, u, side="right"), len(cdf) - 1)]
    return out


# ----- results -------------------------------------------------------------------------------
@dataclass(frozen=True)
class ExactJoint:
    """The rule's joint law of (drafts, output) over the extended draft vocabulary.

    ``members[m]`` is a draft column (local ids in draw order; sets are padded with -1),
    ``mass[m]`` its draft probability, ``out[m]`` the exact output law given it (length k + 1).
    """

    members: IntArray
    mass: FloatArray
    out: FloatArray

    def acceptance(self) -> float:
        """P(output in set(omega)) = sum_m mass_m * sum_{i in set(m)} out[m, i]."""
        hit = distinct_mask(self.members)
        rows = np.broadcast_to(np.arange(self.members.shape[0])[:, None], self.members.shape)
        inside = np.where(hit, self.out[rows, np.maximum(self.members, 0)], 0.0).sum(axis=1)
        return float(self.mass @ inside)

    def output(self) -> FloatArray:
        """The output law over the extended draft vocabulary."""
        return self.mass @ self.out


@dataclass(frozen=True)
class RuleDraw:
    """Sampled drafts (global ids, draw order), output tokens and whether a draft was output."""

    drafts: IntArray
    tokens: IntArray
    accepted: NDArray[np.bool_]


# ----- the interface -------------------------------------------------------------------------
class Rule(ABC):
    """A verification rule: a draft joint plus a (possibly randomised) map drafts -> token.

    Subclasses set ``name``, ``lossless``, ``description`` (with the seed reference) and
    ``joint_kind``, and implement :meth:`local_conditionals` (exact) and :meth:`_draw_local`
    (the procedure itself, vectorised; :class:`DraftThenVerify` for rules that verify drafts
    drawn from their joint). Closed forms override :meth:`acceptance` and
    :meth:`local_output`; the tests check them against :meth:`exact_joint`.
    """

    name: ClassVar[str]
    lossless: ClassVar[bool] = True
    description: ClassVar[str]
    joint_kind: ClassVar[str]  # see otlp.rules.joints.KINDS; "instance" = the instance's scheme

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _check_instances(cls)

    def __init__(self, **options: Any) -> None:
        if options:
            raise ValueError(f"options: rule {self.name!r} takes none, got {sorted(options)}")
        self._memo_store: weakref.WeakKeyDictionary[Instance, dict[str, Any]] = (
            weakref.WeakKeyDictionary()
        )

    def _memo(self, inst: Instance, key: str, factory: Callable[[], T]) -> T:
        """``factory()`` computed once per (instance, key) and kept while the instance lives
        (instances are immutable), so repeated ``conditional`` calls stay cheap."""
        store = self._memo_store.setdefault(inst, {})
        if key not in store:
            store[key] = factory()
        return store[key]

    def __repr__(self) -> str:
        return f"<rule {self.name}: {self.description}>"

    # ----- the draft joint -----------------------------------------------------------------
    def draft_joint(self, inst: Instance) -> DraftJoint:
        """The draft joint this rule verifies (its own, or the instance's scheme)."""
        kind = inst.scheme if self.joint_kind == "instance" else self.joint_kind
        return DraftJoint.of(inst, kind)

    def alpha_star(self, inst: Instance) -> float:
        """Optimal acceptance alpha* of the rule's own draft joint (the bound it must respect)."""
        return self.draft_joint(inst).alpha_star(inst)

    def draft_columns(self, inst: Instance) -> tuple[IntArray, FloatArray]:
        """Draft columns (members, mass) the exact joint is enumerated over."""
        return self.draft_joint(inst).enumerate()

    # ----- exact quantities ----------------------------------------------------------------
    @abstractmethod
    def local_conditionals(self, inst: Instance, members: IntArray) -> FloatArray:
        """Exact output law given each row of drafted local ids; shape (rows, k + 1)."""

    def exact_joint(self, inst: Instance) -> ExactJoint:
        """Enumerate the draft joint and the exact output law given each column."""
        members, mass = self.draft_columns(inst)
        check_size(f"exact joint of rule {self.name!r}", members.shape[0] * (inst.k + 1))
        return ExactJoint(members, mass, self.local_conditionals(inst, members))

    def acceptance(self, inst: Instance) -> float:
        """Exact P(output token in set(omega)) under the rule's own draft joint."""
        return self.exact_joint(inst).acceptance()

    def local_output(self, inst: Instance) -> FloatArray:
        """Exact output law over the extended draft vocabulary (length k + 1)."""
        return self.exact_joint(inst).output()

    def output_distribution(self, inst: Instance) -> FloatArray:
        """Exact output law over the whole vocabulary (equals p for a lossless rule)."""
        return inst.global_law(self.local_output(inst))

    def conditional(self, inst: Instance, omega: ArrayLike) -> FloatArray:
        """Exact law of the output token given drafted global ids ``omega`` (draw order).

        Single-draft rules verify the first draft: they accept ``omega`` of any length >= 1.
        """
        joint = self.draft_joint(inst)
        local = joint.local_omega(inst, omega)
        return inst.global_law(self.local_conditionals(inst, local[None, :])[0])

    # ----- sampling ------------------------------------------------------------------------
    @abstractmethod
    def _draw_local(
        self, inst: Instance, rng: np.random.Generator, size: int
    ) -> tuple[IntArray, IntArray]:
        """Draft and verify ``size`` times: (drafts as local ids, extended-vocabulary outputs)."""

    def draw(self, inst: Instance, rng: object, size: int) -> RuleDraw:
        """Draw ``size`` draft tuples from the rule's joint and verify them; ``rng`` is an int
        seed, None or a ``numpy.random.Generator``."""
        rng = as_generator(rng)
        size = positive_int("size", size)
        drafts, out = self._draw_local(inst, rng, size)
        accepted = (out[:, None] == drafts).any(axis=1)
        return RuleDraw(inst.tokens[drafts], local_to_tokens(inst, out, rng), accepted)

    def sample(self, inst: Instance, rng: object, size: int) -> tuple[IntArray, NDArray[np.bool_]]:
        """``size`` verified tokens (global ids) and whether each is one of its drafts."""
        result = self.draw(inst, rng, size)
        return result.tokens, result.accepted


# Public methods whose first argument is the instance: a wrong type gets a ValueError naming
# ``inst`` instead of an AttributeError deep inside (subclasses' overrides included).
_INSTANCE_METHODS = (
    "acceptance",
    "alpha_star",
    "conditional",
    "draft_joint",
    "draw",
    "exact_joint",
    "local_output",
    "output_distribution",
    "sample",
)


def _check_instances(cls: type) -> None:
    for name in _INSTANCE_METHODS:
        method = cls.__dict__.get(name)
        if method is not None and not getattr(method, "__isabstractmethod__", False):
            setattr(cls, name, _checking_instance(method))


def _checking_instance(method: Callable[..., T]) -> Callable[..., T]:
    @functools.wraps(method)
    def checked(self: Rule, inst: object, *args: Any, **kwargs: Any) -> T:
        return method(self, require_instance(inst), *args, **kwargs)

    return checked


_check_instances(Rule)


class DraftThenVerify(Rule):
    """A rule that samples drafts from its joint, then runs a verification procedure on them."""

    @abstractmethod
    def _verify(self, inst: Instance, drafts: IntArray, rng: np.random.Generator) -> IntArray:
        """Run the rule on rows of drafted local ids; extended-vocabulary outputs."""

    def _draw_local(
        self, inst: Instance, rng: np.random.Generator, size: int
    ) -> tuple[IntArray, IntArray]:
        drafts = self.draft_joint(inst).sample(rng, size)
        return drafts, self._verify(inst, drafts, rng)
