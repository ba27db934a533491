"""Global resolution's exact fallback: a unit solved by max-flow on its own network.

[GR] §5.3 and Appendix F: the inner network, or one block's part of the outer network with
the polymatroid targets as source capacities, so the exact flow stays consistent with the
other units and with Eq. (18).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from otlp.builders import BipartiteSystem
from otlp.global_resolution.constants import ROUNDING_SHORTFALL
from solvers.global_resolution import OuterTargets
from solvers.registry import get_backend

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass
class ExactUnit:
    """A unit solved exactly: arc values on its max-flow network ([GR] §5.3, App. F).

    ``arcs`` indexes the unit's arcs within the full outer or inner system's arc list.
    """

    network: BipartiteSystem
    values: FloatArray
    arcs: IntArray

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
