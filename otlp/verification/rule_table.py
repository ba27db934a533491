"""Every verification rule a decoder can run, declared once.

One :class:`VerificationRule` per rule: its name, how it verifies a draft tree (its
protocol), the drafting schemes :func:`~otlp.verification.tree.verify_tree` accepts it on,
the schemes :func:`otlp.verify_drafts` runs it for at a single position, whether it takes
global resolution's error threshold ``tau``, its compiled node kernel
(:mod:`otlp.solvers.node_rules`) and, for path and sequence rules, its exact law. Every method
list of the package, the decode loop, the referee, ``otlp bench``, ``otlp decode`` and the
CLI is read from :data:`RULES`.

Protocols:

* ``node`` — SpecTr / SpecInfer traversal ([GR] Appendix R): a single-step rule at each
  visited node draws the next token from its conditional law given the node's children. Its
  exact law and its token are the kernel registered for it with :func:`node_kernel`
  (:mod:`otlp.verification.node_steps`).
* ``path`` — block verification of one drafted path ([GBV] §2.1), or of the path a rule
  selects among K i.i.d. paths (GBV, [GBV] §5): ``stop_law`` gives the law of the accepted
  length and of the token emitted after it.
* ``sequence`` — whole sequences tested from the leaves to the root (Traversal Verification,
  Weng et al., NeurIPS 2025, arXiv 2505.12398): ``tests`` lists one row's tests in order,
  ``stop_law`` their exact law (:mod:`otlp.multistep.traversal`).

A new rule is one entry in :data:`RULES` plus its kernel; nothing that dispatches on a
method's name changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from otlp.args import canonical_name
from otlp.multistep import hsd, single_path, traversal
from otlp.solvers.arrays import FloatArray, IntArray
from otlp.solvers.node_rules import KSEQ_RULE, REJECTION, SPECHUB_RULE
from otlp.verification.drafting import SCHEMES

Protocol = Literal["node", "path", "sequence"]
StopLaw = Callable[[FloatArray, FloatArray, IntArray], single_path.StopLaw]
POSITION_SCHEMES = ("iid", "without_replacement", "independent", "greedy")  # verify_drafts'
ANY_COUNT = 1 << 30  # a compiled rule verifying every child of a node


class CompiledNode(NamedTuple):
    """A node rule's compiled kernel (:func:`otlp.solvers.node_rules.node_token`): its code and the
    number of children it verifies (the first ones)."""

    code: int
    max_drafts: int


@dataclass(frozen=True)
class VerificationRule:
    """One rule: what it verifies and how (see the module docstring).

    ``schemes``: the drafting schemes of a tree's children it verifies, its default first.
    ``positions``: the schemes :func:`otlp.verify_drafts` runs it for (empty: not at a
    single position). ``drafts``: the number of drafts a position verifies where fixed (one
    for speculative sampling, a pair for SpecHub). ``max_paths``: a path rule's paths (one:
    a chain). ``selects_path``: a path rule that picks one of K i.i.d. paths and verifies it
    against its skewed draft law (GBV). ``same_at_one_child``: the rule it equals in
    acceptance when every node has one child (a decode grid measures that one only).
    """

    name: str
    protocol: Protocol
    schemes: tuple[str, ...]
    summary: str
    reference: str
    positions: tuple[str, ...] = ()
    drafts: int | None = None
    takes_tau: bool = False
    compiled: CompiledNode | None = None
    stop_law: StopLaw | None = None
    max_paths: int | None = None
    selects_path: bool = False
    tests: Callable[..., Any] | None = None
    sequence_law: Callable[..., Any] | None = None
    same_at_one_child: str | None = None

    @property
    def default_scheme(self) -> str:
        """The scheme assumed where a caller names none."""
        return self.schemes[0]

    def verifies(self, paths: int, branching: Sequence[int] = ()) -> bool:
        """Whether it verifies K = ``paths`` draft paths, or a tree of ``branching`` children
        per depth: a chain rule one path, a rule of a pair per node (SpecHub's) at most two
        children per node, a rule that selects one of K paths no tree."""
        widest = max(branching) if branching else paths
        if self.max_paths == 1:
            return widest == 1
        if self.drafts == 2:
            return widest <= 2
        return not (self.selects_path and branching)


RULES: dict[str, VerificationRule] = {
    rule.name: rule
    for rule in (
        VerificationRule(
            "sps", "node", SCHEMES, "speculative sampling on the first child",
            "Leviathan et al. 2023; Chen et al. 2023", positions=("iid",), drafts=1,
            compiled=CompiledNode(REJECTION, 1),
        ),
        VerificationRule(
            "rrs", "node", ("iid",), "recursive rejection sampling, i.i.d. drafts",
            "[SpecHub] Algorithm 1; SpecInfer", positions=("iid",),
            compiled=CompiledNode(REJECTION, ANY_COUNT), same_at_one_child="sps",
        ),
        VerificationRule(
            "rrs_without_replacement", "node", ("without_replacement",),
            "recursive rejection sampling, drafts without replacement",
            "[SpecHub] Algorithm 1", positions=("without_replacement",),
            compiled=CompiledNode(REJECTION, ANY_COUNT), same_at_one_child="sps",
        ),
        VerificationRule(
            "kseq", "node", ("iid",), "SpecTr's K-SEQ", "SpecTr (Sun et al. 2023) Algorithm 2",
            positions=("iid",), compiled=CompiledNode(KSEQ_RULE, ANY_COUNT),
            same_at_one_child="sps",
        ),
        VerificationRule(
            "spechub", "node", ("spechub",), "SpecHub on the hub pair",
            "[SpecHub] Algorithm 3", positions=("iid",), drafts=2,
            compiled=CompiledNode(SPECHUB_RULE, 2), same_at_one_child="sps",
        ),
        VerificationRule(
            "global_resolution", "node", ("iid", "without_replacement"),
            "optimal transport to accuracy tau (global resolution)", "[GR] §6",
            positions=POSITION_SCHEMES, takes_tau=True, same_at_one_child="sps",
        ),
        VerificationRule(
            "maxflow_cs", "node", ("iid", "without_replacement"),
            "exact optimal transport (max-flow with complementary slackness)", "[GR] §5.3",
            positions=POSITION_SCHEMES, same_at_one_child="sps",
        ),
        VerificationRule(
            "partial_resolution", "node", ("iid",),
            "exact optimal transport for i.i.d. drafts (clock race)",
            "Thomas and Pal, NeurIPS 2025; docs/partial-resolution.md", positions=("iid",),
            same_at_one_child="sps",
        ),
        VerificationRule(
            "block", "path", SCHEMES, "block verification of one chain", "[GBV] §2.1",
            stop_law=single_path.block, max_paths=1,
        ),
        VerificationRule(
            "gbv", "path", ("iid",), "greedy multi-path block verification of K i.i.d. paths",
            "[GBV] §5", stop_law=single_path.block, selects_path=True,
            same_at_one_child="block",
        ),
        VerificationRule(
            "hsd", "path", SCHEMES, "Hierarchical Speculative Decoding on one chain",
            "Zhou et al., ICLR 2026, arXiv 2601.05724; docs/hsd.md", stop_law=hsd.chain,
            max_paths=1,
        ),
        VerificationRule(
            "traversal_verification", "sequence", ("iid", "without_replacement"),
            "Traversal Verification, leaves to root", "Weng et al., NeurIPS 2025",
            tests=traversal.tests, sequence_law=traversal.stop_law,
        ),
    )
}  # fmt: skip


# The rule that verifies each position by exact optimal transport for its draft scheme, where
# the caller names none: partial resolution for i.i.d. drafts (exact, no tolerance), SpecHub
# for its own hub pairs, global resolution ([GR] §6, certified to 15 tau) for the others.
_OPTIMAL = {"iid": "partial_resolution", "spechub": "spechub"}


def optimal_method(scheme: str) -> str:
    """The method every decoder call runs with ``method=None`` for drafts of ``scheme``
    (canonical): exact optimal transport at each position (:data:`_OPTIMAL`, else
    ``global_resolution``). A chain has one draft per position, where that optimum is
    speculative sampling's law: :func:`otlp.verify_chain` runs ``sps`` for it."""
    return _OPTIMAL.get(scheme, "global_resolution")


def get(method: object) -> VerificationRule:
    """The rule called ``method`` (canonical spelling), else a ``ValueError`` naming
    ``method`` and every rule."""
    name = canonical_name(method, "method")
    if name not in RULES:
        raise ValueError(f"method: expected one of {', '.join(RULES)}, got {name!r}")
    return RULES[name]


def names(protocol: Protocol | None = None) -> tuple[str, ...]:
    """The rules' names in the table's order, or those of one protocol."""
    return tuple(n for n, r in RULES.items() if protocol is None or r.protocol == protocol)


def position_names(scheme: str = "iid") -> tuple[str, ...]:
    """The rules :func:`otlp.verify_drafts` runs for drafts of ``scheme``: global resolution
    (the rule it was built for, [GR] §6) first, then the table's order."""
    found = [n for n, r in RULES.items() if scheme in r.positions]
    return tuple(sorted(found, key=lambda n: not RULES[n].takes_tau))


def schemes_of() -> dict[str, tuple[str, ...]]:
    """Rule name -> the schemes of a tree's children it verifies (its default first)."""
    return {n: r.schemes for n, r in RULES.items()}


@dataclass(frozen=True)
class NodeKernel:
    """A node rule's exact conditional law ``law(p, q, omega, scheme, tau)`` over the
    vocabulary and its sampled token ``token(p, q, omega, scheme, tau, u)`` (checked float64
    rows, ``omega`` the drafts, ``u`` n + 2 uniforms); ``fused(...)`` reads the rows as given
    where ``fuses(scheme, top_k)`` (a compiled decoder row that checks, restricts and
    renormalises them itself), -1 where the restricted path must decide."""

    law: Callable[..., FloatArray]
    token: Callable[..., int]
    fused: Callable[..., int] | None = None
    fuses: Callable[[str, int | None], bool] | None = None


_NODE_KERNELS: dict[str, NodeKernel] = {}


def register_node_kernel(name: str, kernel: NodeKernel) -> None:
    """Register node rule ``name``'s kernel (a name the table declares as a node rule)."""
    if name not in RULES or RULES[name].protocol != "node":
        raise ValueError(f"name: {name!r} is not a node rule of the table")
    _NODE_KERNELS[name] = kernel


def node_kernel(name: str) -> NodeKernel:
    """Node rule ``name``'s registered kernel."""
    return _NODE_KERNELS[name]


__all__ = [
    "RULES",
    "CompiledNode",
    "NodeKernel",
    "VerificationRule",
    "get",
    "names",
    "node_kernel",
    "position_names",
    "register_node_kernel",
    "schemes_of",
]
