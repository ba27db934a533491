"""Global resolution's exact fallback: a unit solved by max-flow on its own network.

[GR] §5.3 and Appendix F: the inner network, or one block's part of the outer network with
the polymatroid targets as source capacities, so the exact flow stays consistent with the
other units and with Eq. (18).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from math import comb

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from otlp import combinatorics as cb
from otlp.builders import BipartiteSystem
from otlp.columns import DraftColumns, mass_operations, set_mass, set_sizes
from otlp.global_resolution.constants import ROUNDING_SHORTFALL
from otlp.instance import Instance
from otlp.limits import check_size, check_work
from otlp.solvers.arrays import FloatArray, IntArray
from otlp.solvers.global_resolution import OuterTargets
from otlp.solvers.global_resolution.budget import NO_DEADLINE, Deadline, max_flow_seconds, require
from otlp.solvers.registry import get_backend


@dataclass
class ExactUnit:
    """A unit solved exactly: arc values on its max-flow network ([GR] §5.3, App. F).

    ``arcs`` indexes the unit's arcs within the full outer or inner system's arc list (None
    until the plan is materialised, for a network built over the unit's own columns:
    ``own_columns``).
    """

    network: BipartiteSystem
    values: FloatArray
    arcs: IntArray | None
    own_columns: bool = False

    def column(self, local: IntArray) -> int:
        """The network's column of the drafted local ids."""
        if self.own_columns:
            return column_of(self.network.columns, local)
        return int(self.network.columns.indices_of(local[None, :])[0])

    @cached_property
    def matrix(self) -> sp.csc_matrix:
        cols = self.network.columns
        return sp.csc_matrix(
            (self.values, (self.network.arc_tokens(), self.network.arc_columns())),
            shape=(cols.k, cols.count),
        )


def max_flow_values(network: BipartiteSystem) -> FloatArray:
    """The arc values of a maximum flow on ``network`` (OR-Tools)."""
    if not network.num_arcs:
        return np.zeros(0)
    result = get_backend("ortools-maxflow").solve(network.to_maxflow())
    return network.arc_values_from_flow(result.primal)


def restore_rounded_outer_flow(
    network: BipartiteSystem, values: FloatArray, target_rows: FloatArray
) -> FloatArray:
    """Put back the flow that integer rounding took from saturated outer columns.

    Every column of the outer system is transported in full ([GR] Theorem 5.1), but a column
    of tiny mass (1e-300, subnormal) gets no flow from a max-flow on scaled int64 capacities,
    and its slice pi(.|omega) would sum to 0. A shortfall of at most ``ROUNDING_SHORTFALL`` is
    spread over the column's own arcs in proportion to their target rows (equally when those
    are all 0); the marginals move by no more than the rounding already lost.
    """
    if values.size == 0:
        return values
    cols = network.arc_columns()
    mass = network.columns.mass
    short = mass - np.bincount(cols, weights=values, minlength=mass.shape[0])
    fix = (short > 0) & (short <= ROUNDING_SHORTFALL)
    if not fix[cols].any():
        return values
    weight = target_rows[network.arc_tokens()]
    total = np.bincount(cols, weights=weight, minlength=mass.shape[0])
    arcs = np.bincount(cols, minlength=mass.shape[0]).astype(float)
    share = np.where(total[cols] > 0, weight / np.where(total > 0, total, 1.0)[cols], 0.0)
    share = np.where(total[cols] > 0, share, 1.0 / np.maximum(arcs[cols], 1.0))
    return values + np.where(fix[cols], short[cols] * share, 0.0)


def outer_arc_blocks(
    network: BipartiteSystem, outer: OuterTargets
) -> tuple[IntArray, NDArray[np.bool_]]:
    """Each outer arc's token block, and whether it is the earliest block of its column."""
    blocks = outer.block_of[network.arc_tokens()]
    cols = network.arc_columns()
    earliest = np.full(network.columns.count, np.iinfo(np.int64).max)
    np.minimum.at(earliest, cols, blocks)
    return blocks, blocks == earliest[cols]


def block_network(
    network: BipartiteSystem,
    outer: OuterTargets,
    block: int,
    arc_blocks: tuple[IntArray, NDArray[np.bool_]],
    k: int,
) -> tuple[BipartiteSystem, IntArray]:
    """Outer block ``block``'s own network and its arcs' positions in ``network``'s arc list.

    The block keeps the columns whose earliest block it is and the arcs to its own tokens;
    its source capacities are the polymatroid targets, so the exact flow meets them and
    stays consistent with the other units and with Eq. (18).
    """
    blocks, active = arc_blocks
    arcs = np.flatnonzero(active & (blocks == block))
    tokens, cols = network.arc_tokens()[arcs], network.arc_columns()[arcs]
    left = outer.block_tokens(block)
    position = np.full(k, -1, dtype=np.int64)
    position[left] = np.arange(left.shape[0])
    right, arc_right = np.unique(cols, return_inverse=True)
    sub = BipartiteSystem(
        network.columns,
        left,
        outer.block_targets(block),
        right,
        network.columns.mass[right],
        position[tokens],
        arc_right.astype(np.int64),
    )
    return sub, arcs


def unit_columns(
    inst: Instance,
    allowed: NDArray[np.bool_],
    required: NDArray[np.bool_] | None,
    deadline: Deadline = NO_DEADLINE,
) -> DraftColumns:
    """The draft sets of one unit, with their exact masses, without the rest of the system.

    The sets of the scheme's sizes inside ``allowed`` that meet ``required`` (None: all):
    for the inner system the sets inside H*; for outer block b the sets that meet b and no
    earlier block (their earliest block is b). Sizes and work are checked against
    ``otlp.limits`` for this unit alone, and the estimated seconds of the whole exact
    fallback (sets, masses, max-flow) against ``deadline``, before anything is enumerated.
    """
    n, tokens = inst.n, np.flatnonzero(allowed)
    size = tokens.shape[0]
    sizes = set_sizes(inst.scheme, size, n)
    arcs = cb.count_sets(size, sizes) * n
    check_size(f"the exact fallback's draft sets (k = {size}, n = {n})", arcs)
    distinct = not np.all(inst.draft_rows == inst.draft_rows[:1])
    missing = 0 if required is None else size - int(required[tokens].sum())
    work = 0  # the masses of the kept sets only: those that meet ``required``
    for j in sizes:
        per_size = mass_operations(inst.scheme, size, n, range(j, j + 1), distinct)
        work += per_size * (comb(size, j) - comb(missing, j)) // max(comb(size, j), 1)
    check_work(f"the exact fallback's set masses ({inst.scheme}, k = {size}, n = {n})", work)
    require(deadline, max_flow_seconds(arcs, work), "the exact max-flow")
    blocks, masses = [], []
    for j in sizes:
        subsets = tokens[cb.colex_subsets(tokens.shape[0], j)]
        if required is not None:
            subsets = subsets[required[subsets].any(axis=1)]
        padded = np.full((subsets.shape[0], n), -1, dtype=np.int64)
        padded[:, :j] = subsets
        blocks.append(padded)
        masses.append(set_mass(inst.draft_rows, n, inst.scheme, subsets))
    members = np.vstack(blocks) if blocks else np.zeros((0, n), dtype=np.int64)
    real = members >= 0
    return DraftColumns(
        "sets",
        inst.k,
        n,
        members,
        np.concatenate(masses) if masses else np.zeros(0),
        members[real],
        np.nonzero(real)[0].astype(np.int64),
        tuple(sizes),
    )


def unit_network(
    columns: DraftColumns,
    left: IntArray,
    left_cap: FloatArray,
    k: int,
) -> BipartiteSystem:
    """Tokens ``left`` (capacities ``left_cap``) and all of ``columns``, with the arcs from
    each column to its members among ``left``."""
    position = np.full(k, -1, dtype=np.int64)
    position[left] = np.arange(left.shape[0])
    keep = position[columns.inc_token] >= 0
    return BipartiteSystem(
        columns,
        left,
        left_cap,
        np.arange(columns.count, dtype=np.int64),
        columns.mass,
        position[columns.inc_token[keep]],
        columns.inc_col[keep],
    )


def column_of(columns: DraftColumns, local: IntArray) -> int:
    """The column of ``columns`` whose set is the set of the drafted local ids."""
    distinct = np.unique(local)
    row = np.full(columns.n, -1, dtype=np.int64)
    row[: distinct.shape[0]] = distinct
    found = np.flatnonzero((columns.members == row).all(axis=1))
    if found.shape[0] != 1:
        raise ValueError("omega: its draft set is not a column of this unit")
    return int(found[0])


def full_arcs(unit: BipartiteSystem, full: BipartiteSystem) -> IntArray:
    """Positions in ``full``'s arc list of ``unit``'s arcs (the same token and draft set).

    A unit network's columns are a subset of the full system's sets (both "sets" form):
    each set is ranked in the full columns by its members (padding repeats a member).
    """
    members = unit.columns.members
    padded = np.where(members >= 0, members, members[:, :1])
    full_column = full.columns.indices_of(padded)[unit.arc_columns()]
    width = full.columns.k + 1
    full_keys = full.arc_columns() * width + full.arc_tokens()
    order = np.argsort(full_keys, kind="stable")
    keys = full_column * width + unit.arc_tokens()
    found = order[np.searchsorted(full_keys, keys, sorter=order)]
    if not np.array_equal(full_keys[found], keys):
        raise AssertionError("a unit's arc is missing from the full system")
    return found.astype(np.int64)
