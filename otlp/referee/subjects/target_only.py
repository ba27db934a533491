"""Target-only verification, as EAGLE and SGLang verify draft trees: sample the target at the
node and accept if the sample is a child's token.

EAGLE (Li et al. 2024, "EAGLE: speculative sampling requires rethinking feature uncertainty",
§4.2; EAGLE-2 keeps the verification) and SGLang's tree verification with sampling walk the
tree this way. Every emitted token is a draw from the target, so it is lossless whatever the
drafts, but it ignores q and accepts at most P(y in drafts) for y ~ p, below the optimum.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from otlp.referee.subjects.common import (
    FloatArray,
    IntArray,
    draw,
    position_args,
    walk_tree,
)


def target_only(p: ArrayLike, q: ArrayLike, drafts: ArrayLike, rng: np.random.Generator) -> int:
    """One position of target-only verification: y ~ p, whatever the drafts.

    Protocol: position. Draft scheme: any (the drafts are only compared with y; registered
    with i.i.d. drafts). Expected lossless.
    """
    return target_draw(*position_args(p, q, drafts), rng)


def target_draw(
    target: FloatArray, laws: FloatArray, drafts: IntArray, rng: np.random.Generator
) -> int:
    """:func:`target_only` on checked arguments: a draw from ``target``."""
    return draw(target, rng)


def target_only_tree(
    tokens: ArrayLike, parents: ArrayLike, p: ArrayLike, q: ArrayLike, rng: np.random.Generator
) -> tuple[list[int], int]:
    """EAGLE / SGLang tree verification with sampling: at each node y ~ p at its context; if y
    is a child's token move to that child (the first one), else stop with y as the bonus token.

    Protocol: tree. Draft scheme: any (registered with i.i.d. children). Expected lossless.
    """
    return walk_tree(tokens, parents, p, q, rng, target_draw)
