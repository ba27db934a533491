"""The optimal valid K-path verification algorithm ([GBV] Theorem 4.6), exactly on tiny trees.

By Lemma 4.4 every valid K-path algorithm selects one of the K i.i.d. drafted paths with some
rule, which gives the selected path a *skewed draft* law q~ over length-L paths, and then
verifies that path alone with target M_b and draft q~; by Theorem 3.4 block verification is
the best such single-path step. Theorem 4.6 therefore maximises block verification's block
efficiency over the realisable q~. [GBV] lost the formulas in its text export; reconstructed
(and confirmed in otlp.validate's ``gbv.thm4_6.*`` checks):

* realisable q~ (Lemma 4.5, Appendix E/H): q~(S) <= phi_K(M_s(S)) for every set S of
  length-L paths, q~(all) = 1, q~ >= 0, with phi_K(m) = 1 - (1 - m)^K. This is the base
  polytope of the polymatroid S -> phi_K(M_s(S)) (phi_K concave, so the function is
  submodular); its vertices are the greedy solutions, one per global ranking of paths, which
  are exactly the skewed drafts of greedy verification (Eq. 25, Definition 5.1, Appendix H).
* objective (Eqs. 21–23 with Eq. 88): block verification with draft q~ attains the single-
  path LP (Theorem 3.3 with q~), whose greedy optimum is beta(u) = min(beta(parent(u)),
  q~(u) / M_b(u)), so the block efficiency is
  F(q~) = 1 + sum_u min(M_b(u), min_{v prefix of u} M_b(u) q~(v) / M_b(v))
  over all prefixes u of length 1..L (q~(v) = q~ of the paths extending v).

F is a sum of minima of linear functions of q~, hence **concave**: [GBV]'s "nonlinear
optimization" is an LP over (beta, q~) jointly (exponentially many rows, so still intractable at
scale)

    maximise 1 + sum_u M_b(u) beta(u)
    s.t.     beta(u) <= beta(parent(u)), beta <= 1 on level 1, M_b(u) beta(u) <= q~(u),
             q~ in the base polytope above,

solved here with every subset S enumerated (tiny trees only: V**L paths, 2**(V**L) rows).
The optimum need not be a vertex, so best-of-all-rankings is only a lower bound. By Lemma 4.4
and Theorem 3.4 it must equal the antichain LP of Theorem 4.3 (:func:`multi_path_lp`), which
the ``gbv.thm4_6.equals_antichain_lp`` check confirms on random tiny trees.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from otlp.args import positive_int
from otlp.limits import check_size
from otlp.multistep.lp import NodeSpace, phi
from otlp.multistep.models import Model
from otlp.multistep.table import PrefixTable, tabulate
from otlp.solvers.arrays import BoolArray, FloatArray
from otlp.solvers.base import LinearProgram
from otlp.solvers.registry import get_backend

MAX_PATHS = 12  # 2**12 subset rows: the enumeration is for tiny trees only


@dataclass(frozen=True)
class OptimalSelection:
    """Theorem 4.6's optimum: the best realisable skewed draft and block verification on it."""

    paths: int
    gamma: int
    expected_accepted: float
    skewed: FloatArray  # q~ over the V**L paths (lexicographic)
    budgets: tuple[FloatArray, ...]  # block verification's node budgets under q~

    @property
    def block_efficiency(self) -> float:
        return self.expected_accepted + 1.0


def subset_masks(count: int) -> BoolArray:
    """Every nonempty subset of ``count`` paths as rows of a boolean mask."""
    check_size("subsets of draft paths", 2**count * count)
    codes = np.arange(1, 2**count)
    return ((codes[:, None] >> np.arange(count)[None, :]) & 1).astype(bool)


def prefix_matrix(space: NodeSpace) -> sp.csr_matrix:
    """Rows u (all prefixes, level order) x columns (paths): 1 where the path extends u."""
    vocab, gamma = space.vocab_size, space.gamma
    paths = np.arange(vocab**gamma)
    rows = np.concatenate(
        [space.level(d).start + paths // vocab ** (gamma - d) for d in range(1, gamma + 1)]
    )
    cols = np.tile(paths, gamma)
    return sp.csr_matrix((np.ones(rows.shape[0]), (rows, cols)), shape=(space.size, paths.size))


def skewed_objective(target: PrefixTable, skewed: FloatArray, gamma: int) -> float:
    """F(q~) - 1: block verification's expected accepted tokens with draft ``skewed``
    (closed form of the single-path LP optimum; see the module docstring)."""
    space = NodeSpace(target.vocab_size, gamma)
    beta = space.flatten(list(skewed_budgets(target, skewed, gamma)))
    return float(space.masses(target) @ beta)


def skewed_budgets(target: PrefixTable, skewed: FloatArray, gamma: int) -> tuple[FloatArray, ...]:
    """Block verification's node budgets with draft q~: beta(u) = min(beta(parent(u)),
    q~(u) / M_b(u), 1) (0 where M_b(u) = 0), level by level (Appendix C)."""
    space = NodeSpace(target.vocab_size, gamma)
    mb = space.masses(target)
    q = prefix_matrix(space) @ np.asarray(skewed, dtype=np.float64)
    out, beta = [], np.ones(1)
    for d in range(1, gamma + 1):
        level = space.level(d)
        with np.errstate(divide="ignore", invalid="ignore"):
            own = np.where(mb[level] > 0, q[level] / mb[level], 0.0)
        beta = np.minimum(np.repeat(beta, target.vocab_size), np.minimum(own, 1.0))
        out.append(beta)
    return tuple(out)


def path_law_table(skewed: FloatArray, vocab: int, gamma: int) -> PrefixTable:
    """The autoregressive table of a law on length-L paths ([GBV] Eqs. 18–19); the law after
    a prefix of probability 0 is uniform (it is never used)."""
    levels = []
    joint = np.asarray(skewed, dtype=np.float64)
    marginals = [joint]
    for _ in range(gamma):
        marginals.append(marginals[-1].reshape(-1, vocab).sum(axis=1))
    for d in range(gamma):
        parent, child = marginals[gamma - d], marginals[gamma - d - 1].reshape(-1, vocab)
        with np.errstate(divide="ignore", invalid="ignore"):
            levels.append(np.where(parent[:, None] > 0, child / parent[:, None], 1.0 / vocab))
    return PrefixTable(tuple(levels))


def realisability_violation(skewed: FloatArray, draft_paths: FloatArray, paths: int) -> float:
    """Largest violation of Lemma 4.5 by a law on paths: max_S q~(S) - phi_K(M_s(S)), the sum
    condition and the sign (0 if realisable by some path-selection rule)."""
    masks = subset_masks(skewed.shape[0])
    worst = float(np.max(masks @ skewed - phi(masks @ draft_paths, paths)))
    return max(worst, abs(float(skewed.sum()) - 1.0), float(-skewed.min()), 0.0)


def optimal_path_selection(
    target: Model | PrefixTable,
    draft: Model | PrefixTable,
    gamma: int,
    paths: int,
    *,
    backend: str = "highs",
    context: tuple[int, ...] = (),
) -> OptimalSelection:
    """[GBV] Theorem 4.6's optimal skewed draft and its block efficiency, as one exact LP.

    Tiny trees only (at most ``MAX_PATHS`` = 12 length-L paths): every set of paths is a row.
    """
    gamma = positive_int("gamma", gamma)
    paths = positive_int("paths", paths)
    tgt = tabulate(target, gamma, context=context, name="target")
    dft = tabulate(draft, gamma, context=context, name="draft")
    space = NodeSpace(tgt.vocab_size, gamma)
    count = tgt.vocab_size**gamma
    if count > MAX_PATHS:
        raise ValueError(
            f"gamma: V**L = {count} paths exceed {MAX_PATHS}; Theorem 4.6's exact optimum "
            "enumerates every set of paths (use multi_path_lp for the LP bound)"
        )
    mb, size = space.masses(tgt), space.size
    ms_paths = dft.joint(gamma)
    vocab = space.vocab_size
    width = size + count
    eye = sp.identity(size, format="csr")
    # beta <= 1 on level 1; beta(child) - beta(parent) <= 0
    top = sp.hstack([eye[:vocab], sp.csr_matrix((vocab, count))])
    child = np.arange(vocab, size)
    parent = np.arange(size - vocab**gamma).repeat(vocab)
    chain = sp.csr_matrix(
        (
            np.r_[np.ones(child.size), -np.ones(child.size)],
            (np.r_[np.arange(child.size), np.arange(child.size)], np.r_[child, parent]),
        ),
        shape=(child.size, width),
    )
    # M_b(u) beta(u) - q~(u) <= 0 (Theorem 3.3 with draft q~)
    budget = sp.hstack([sp.diags(mb), -prefix_matrix(space)])
    masks = subset_masks(count)
    realisable = sp.hstack([sp.csr_matrix((masks.shape[0], size)), sp.csr_matrix(masks * 1.0)])
    program = LinearProgram(
        c=np.r_[mb, np.zeros(count)],
        A_ub=sp.vstack([top, chain, budget, realisable]).tocsr(),
        b_ub=np.r_[np.ones(vocab), np.zeros(child.size + size), phi(masks @ ms_paths, paths)],
        A_eq=sp.csr_matrix(np.r_[np.zeros(size), np.ones(count)][None, :]),
        b_eq=np.ones(1),
        maximize=True,
    )
    result = get_backend(backend).solve(program, method="simplex")
    if not result.success:
        raise RuntimeError(f"Theorem 4.6 LP: backend {backend!r} returned {result.raw_status!r}")
    skewed = np.clip(result.primal[size:], 0.0, None)
    skewed = skewed / skewed.sum()
    value = skewed_objective(tgt, skewed, gamma)
    return OptimalSelection(paths, gamma, value, skewed, skewed_budgets(tgt, skewed, gamma))
