"""The best block efficiency of ANY valid verification algorithm for a tree drafting law.

[GBV] Definition 4.1 calls a K-path verification algorithm valid when its output s (the
accepted tokens, then one more) satisfies

* prefix-matching: s[:-1] is a prefix of a drafted path, and
* target-matching: s continued by the target has the target's law M_b on V**(L+1)
  (summed over the drafts and the algorithm's randomness).

Nothing in that definition is special to K i.i.d. paths, so it is generalised here to any
drafted structure omega (a tree whose nodes carry tokens, drafted node by node from the
draft model): s[:-1] must be a root path of omega. An algorithm is then a coupling
pi(omega, s), and the best block efficiency E[len(s)] is the LP

    maximise   sum_{omega, s} len(s) pi(omega, s)
    s.t.       sum_s pi(omega, s) = P(omega)                      for every drafted omega
               sum_{omega, s} pi(omega, s) M_b(x | s) = M_b(x)    for every x in V**(L+1)
               pi >= 0,  pi(omega, s) = 0 unless s[:-1] is a root path of omega,

where M_b(x | s) is the target's probability of continuing s to x (0 unless s is a prefix
of x). Every valid algorithm is a feasible point, and sampling s from pi(. | omega) is a
valid algorithm, so the optimum is the best any rule can do (docs/optimum.md). For the
K-path shape it equals the antichain LP of [GBV] Theorem 4.3 (:func:`.lp.multi_path_lp`) and
Theorem 4.6's optimal path selection (:func:`.optimal.optimal_path_selection`).

Trees with the same set of root paths allow the same outputs, so they are merged (a
solution on the merged classes splits in proportion to P(omega) and back): the LP has one
row per distinct set of drafted prefixes and one column per (set, output) pair. Both grow
exponentially in the tree: tiny trees only.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from otlp.args import canonical_name, integers, positive_int
from otlp.limits import check_size, check_work
from otlp.multistep.lp import NodeSpace
from otlp.multistep.models import Model, prefix_digits
from otlp.multistep.table import PrefixTable, tabulate
from otlp.solvers.arrays import FloatArray
from otlp.solvers.base import LinearProgram
from otlp.solvers.registry import get_backend

SCHEMES = ("iid", "without_replacement")
SHAPES = ("paths{K}", "kary{k}")
_SHAPE = re.compile(r"(paths|kary)([0-9]+)")
LAW_TOL = 1e-9  # a scheme's tuples must carry all of a node's drafting mass


@dataclass(frozen=True)
class TreeOptimum:
    """The LP's optimum for one drafting law: the best valid algorithm's block efficiency."""

    shape: str
    scheme: str
    gamma: int
    branching: tuple[int, ...]  # children per node at depth 0 .. gamma - 1
    block_efficiency: float  # E[len(s)] = accepted + 1
    accepted_law: FloatArray  # P(len(s) - 1 = j), j = 0 .. gamma, at the optimum
    structures: int  # distinct sets of drafted root paths (LP rows of the drafting law)
    outputs: int  # candidate outputs s: every sequence of length 1 .. gamma + 1
    variables: int  # compatible (structure, output) pairs
    status: str

    @property
    def expected_accepted(self) -> float:
        return self.block_efficiency - 1.0


def branching_of(shape: str | Sequence[int], gamma: int) -> tuple[int, ...]:
    """Children per node at each depth for ``shape``: ``"paths{K}"`` is K i.i.d. paths
    (K children at the root, one below), ``"kary{k}"`` k children everywhere; a sequence
    of ``gamma`` positive ints is taken as it is (like :func:`otlp.decoding.k_ary_tree`)."""
    gamma = positive_int("gamma", gamma)
    if isinstance(shape, str):
        match = _SHAPE.fullmatch(shape.strip().lower())
        if match is None or int(match.group(2)) < 1:
            raise ValueError(
                f"shape: expected one of {', '.join(SHAPES)} (K, k >= 1) or a branching "
                f"sequence, got {shape!r}"
            )
        kind, width = match.group(1), int(match.group(2))
        return (width,) + (1,) * (gamma - 1) if kind == "paths" else (width,) * gamma
    widths = integers("shape", shape, minimum=1)
    if len(widths) != gamma:
        raise ValueError(f"shape: a branching sequence needs gamma = {gamma} entries, got {widths}")
    return widths


def check_scheme(scheme: object) -> str:
    """``scheme`` as a canonical name in :data:`SCHEMES`, or a ``ValueError`` naming it."""
    name = canonical_name(scheme, "scheme")
    if name not in SCHEMES:
        raise ValueError(f"scheme: expected one of {', '.join(SCHEMES)}, got {scheme!r}")
    return name


def tree_nodes(branching: Sequence[int]) -> int:
    """Number of drafted nodes of a static tree with this branching."""
    return int(sum(np.cumprod(np.asarray(branching, dtype=np.float64))))


def tuple_probability(q: FloatArray, tokens: Sequence[int], scheme: str) -> float:
    """Probability that a node drafts ``tokens`` (draw order) from ``q`` under ``scheme``."""
    mass = 1.0
    if scheme == "iid":
        for y in tokens:
            mass *= float(q[y])
        return mass
    if len(set(tokens)) != len(tokens):
        return 0.0
    left = 1.0
    for y in tokens:
        if q[y] <= 0.0:
            return 0.0
        mass *= float(q[y]) / left
        left -= float(q[y])
    return mass


def drafted_structures(
    draft: PrefixTable, branching: Sequence[int], scheme: str = "iid"
) -> dict[int, float]:
    """The law of the set of drafted root paths of a tree drafted node by node.

    A set is a bit mask over the prefixes of length 1..gamma in :class:`.lp.NodeSpace`
    order (bit ``space.level(d).start + i`` for the length-d prefix of index i). Each node
    at depth d drafts ``branching[d]`` children from the draft's law after its prefix
    (i.i.d. or without replacement); subtrees are drafted independently given their tokens.
    """
    scheme = check_scheme(scheme)
    gamma, vocab = len(branching), draft.vocab_size
    space = NodeSpace(vocab, gamma)
    check_work(
        "drafted trees enumerated for the optimum LP",
        vocab ** tree_nodes(branching),
        advice="lower gamma, the branching or the vocabulary",
    )
    memo: dict[tuple[int, int], dict[int, float]] = {}

    def below(d: int, i: int) -> dict[int, float]:
        """Law of the drafted prefixes strictly below the length-d prefix of index i."""
        if d == gamma:
            return {0: 1.0}
        if (d, i) in memo:
            return memo[(d, i)]
        q = draft.conditionals[d][i]
        support = np.flatnonzero(q > 0).tolist()
        total: dict[int, float] = {}
        covered = 0.0
        for tokens in itertools.product(support, repeat=branching[d]):
            mass = tuple_probability(q, tokens, scheme)
            if mass <= 0.0:
                continue
            covered += mass
            law = {0: mass}
            for y in tokens:
                child = i * vocab + y
                bit = 1 << (space.level(d + 1).start + child)
                sub = below(d + 1, child)
                law = _union(law, {m | bit: p for m, p in sub.items()})
            for m, p in law.items():
                total[m] = total.get(m, 0.0) + p
        if abs(covered - 1.0) > LAW_TOL:
            where = tuple(prefix_digits(np.array([i]), vocab, d)[0].tolist())
            raise ValueError(
                f"scheme: {scheme} cannot draft {branching[d]} children after prefix {where}: "
                f"the draft law there has {len(support)} tokens of positive probability"
            )
        memo[(d, i)] = total
        return total

    return below(0, 0)


def _union(a: dict[int, float], b: dict[int, float]) -> dict[int, float]:
    """Law of the union of two independent random sets (bit masks)."""
    out: dict[int, float] = {}
    for ma, pa in a.items():
        for mb, pb in b.items():
            key = ma | mb
            out[key] = out.get(key, 0.0) + pa * pb
    return out


def continuation(target: PrefixTable, gamma: int) -> sp.csc_matrix:
    """M_b(x | s): rows x in V**(gamma+1), columns the outputs s of length 1..gamma+1 in
    :class:`.lp.NodeSpace` order (of depth gamma + 1); the target's probability of
    continuing s to x (its laws after s, also where M_b(s) = 0)."""
    vocab, full = target.vocab_size, gamma + 1
    x = np.arange(vocab**full)
    tail = np.ones(x.shape[0])
    outputs = NodeSpace(vocab, full)
    rows, cols, vals = [], [], []
    for n in range(full, 0, -1):  # outputs of length n: tail = prod of laws after position n
        rows.append(x)
        cols.append(outputs.level(n).start + x // vocab ** (full - n))
        vals.append(tail.copy())
        prefix, digit = x // vocab ** (full - n + 1), (x // vocab ** (full - n)) % vocab
        tail = tail * target.conditionals[n - 1][prefix, digit]
    return sp.csc_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(x.shape[0], outputs.size),
    )


def tree_optimum(
    target: Model | PrefixTable,
    draft: Model | PrefixTable,
    gamma: int,
    *,
    shape: str | Sequence[int] = "paths1",
    scheme: str = "iid",
    backend: str = "highs",
    context: tuple[int, ...] = (),
) -> TreeOptimum:
    """The LP of the module docstring, solved exactly; see :func:`optimal_block_efficiency`."""
    gamma = positive_int("gamma", gamma)
    branching = branching_of(shape, gamma)
    scheme = check_scheme(scheme)
    backend = canonical_name(backend, "backend")
    label = shape if isinstance(shape, str) else f"branching {branching}"
    tgt = tabulate(target, gamma + 1, context=context, name="target")
    dft = tabulate(draft, gamma, context=context, name="draft")
    vocab = tgt.vocab_size
    if dft.vocab_size != vocab:
        raise ValueError(f"draft: vocabulary {dft.vocab_size} differs from the target's {vocab}")
    if scheme == "without_replacement" and max(branching) > vocab:
        raise ValueError(
            f"shape: without replacement a node drafts at most V = {vocab} children, "
            f"got {max(branching)}"
        )
    structures = drafted_structures(dft, branching, scheme)
    space, outputs = NodeSpace(vocab, gamma), NodeSpace(vocab, gamma + 1)
    masks = sorted(structures)
    variables = sum((m.bit_count() + 1) * vocab for m in masks)
    advice = "lower gamma, the branching or the vocabulary (the optimum LP is for tiny trees)"
    check_size("optimum LP (drafted structures x outputs)", variables, advice=advice)
    # The simplex's work grows with the dense target-matching block (V**(gamma+1) rows).
    check_work("optimum LP's target-matching block", variables * vocab ** (gamma + 1), advice)
    members = [[g for g in range(space.size) if m >> g & 1] for m in masks]
    # Output ids of the children of each prefix: the root's, then prefix g's (level d, index i).
    level_of = np.concatenate([np.full(vocab**d, d) for d in range(1, gamma + 1)])
    index_of = np.concatenate([np.arange(vocab**d) for d in range(1, gamma + 1)])
    child_start = np.array(
        [
            outputs.level(int(d) + 1).start + int(i) * vocab
            for d, i in zip(level_of, index_of, strict=True)
        ]
    )
    rows, cols = [], []
    for r, prefixes in enumerate(members):
        starts = np.r_[0, child_start[prefixes]]  # root outputs: ids 0..V-1
        ids = (starts[:, None] + np.arange(vocab)[None, :]).ravel()
        rows.append(np.full(ids.shape[0], r))
        cols.append(ids)
    row, col = np.concatenate(rows), np.concatenate(cols)
    lengths = np.concatenate([np.full(vocab**n, n, dtype=np.float64) for n in range(1, gamma + 2)])
    drafting = sp.csr_matrix(
        (np.ones(row.shape[0]), (row, np.arange(row.shape[0]))), shape=(len(masks), row.shape[0])
    )
    matching = continuation(tgt, gamma)[:, col]
    program = LinearProgram(
        c=lengths[col],
        A_eq=sp.vstack([drafting, matching]).tocsr(),
        b_eq=np.r_[np.array([structures[m] for m in masks]), tgt.joint(gamma + 1)],
        maximize=True,
    )
    options = {"method": "simplex"} if backend == "highs" else {}  # a vertex, to rounding
    result = get_backend(backend).solve(program, **options)
    if not result.success:
        raise RuntimeError(f"optimum LP: backend {backend!r} returned {result.raw_status!r}")
    pi = np.asarray(result.primal, dtype=np.float64)  # unclipped: the objective is c @ pi
    accepted = np.bincount(
        lengths[col].astype(np.int64) - 1, weights=pi, minlength=gamma + 1
    ).astype(np.float64)
    return TreeOptimum(
        shape=label,
        scheme=scheme,
        gamma=gamma,
        branching=branching,
        block_efficiency=float(result.objective),
        accepted_law=accepted,
        structures=len(masks),
        outputs=outputs.size,
        variables=variables,
        status=str(result.raw_status),
    )


def optimal_block_efficiency(
    target: Model | PrefixTable,
    draft: Model | PrefixTable,
    gamma: int,
    shape: str | Sequence[int] = "paths1",
    scheme: str = "iid",
    backend: str = "highs",
    context: tuple[int, ...] = (),
) -> float:
    """The best block efficiency (expected tokens per step, accepted + 1) that any valid
    verification algorithm reaches for a tree drafting law, exactly, by one LP.

    ``shape``: ``"paths{K}"`` — K i.i.d. draft paths of length ``gamma`` ([GBV]'s multi-path
    setting; the optimum of its Theorem 4.3 and Theorem 4.6); ``"kary{k}"`` — every node
    drafts k children from the draft's law after its prefix, depth ``gamma`` (the trees
    :func:`otlp.decoding.k_ary_tree` lays out); or a sequence of children per depth.
    ``scheme``: ``"iid"`` or ``"without_replacement"`` (a node's children drawn without
    replacement). ``target``/``draft``: models or :class:`.table.PrefixTable` s (the target
    tabulated to depth ``gamma + 1``), after ``context``.

    Valid means [GBV] Definition 4.1 (prefix- and target-matching) with the drafted tree in
    place of the K paths; the LP (module docstring, docs/optimum.md) is over couplings of
    drafted trees and outputs. Tiny trees only: one variable per (set of drafted root paths,
    compatible output); :class:`otlp.ProblemTooLarge` above the configured limits.
    """
    return tree_optimum(
        target, draft, gamma, shape=shape, scheme=scheme, backend=backend, context=context
    ).block_efficiency
