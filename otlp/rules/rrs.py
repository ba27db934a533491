"""Recursive rejection sampling ([SpecHub] §2 and Algorithm 1): verify the drafts in order;
draft x_j is accepted with probability min(1, p_j(x_j) / q_j(x_j)); on rejection the target
becomes the residual p_{j+1} = norm(max(p_j - q_j, 0)).

* ``rrs`` — drafts drawn with replacement (SpecInfer / multi-draft speculative sampling):
  draw j comes from draft row j (one row, i.i.d., for a single draft model). The residuals do
  not depend on which token was rejected, so acceptance 1 - prod_j (1 - beta_j) with
  beta_j = sum min(p_j, q_j) is closed form.
* ``rrs_without_replacement`` — n distinct drafts drawn sequentially from q; after each
  rejection the rejected token is removed from q and q is renormalised (Algorithm 1, red
  lines). p_{j+1} depends on the rejected prefix through q_j, so the exact acceptance and
  output law are summed over the tree of rejected prefixes of length < n, level by level.

A rejected token has zero residual mass (it was rejected only where q_j > p_j) and keeps it,
so the output lies in set(omega) exactly when a draft was accepted.
"""

from __future__ import annotations

import numpy as np

from otlp.instance import Instance
from otlp.limits import check_size
from otlp.rules.base import DraftThenVerify, draft_ext, ratio_accept, residual
from otlp.rules.sequential import sequential_conditionals, sequential_verify
from otlp.solvers.arrays import FloatArray, IntArray


def replacement_residuals(
    p: FloatArray, rows: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """For drafts with replacement, draw j from ``rows[j]`` (extended): accept probabilities
    min(1, p_j / q_j) (n, K), accepted masses min(p_j, q_j) (n, K), final residual (K,)."""
    accept, hits = [], []
    for q in rows:
        accept.append(ratio_accept(p, q))
        hits.append(np.minimum(p, q))
        p = residual(p, q)
    return np.array(accept), np.array(hits), p


class RecursiveRejection(DraftThenVerify):
    name = "rrs"
    description = (
        "recursive rejection sampling with replacement, SpecInfer / MSS ([SpecHub] §2, "
        "Algorithm 1); one draft row per draw"
    )
    joint_kind = "independent"  # i.i.d. unless the instance has one draft model per draw

    def _sequence(self, inst: Instance) -> tuple[FloatArray, FloatArray, FloatArray]:
        rows = np.array([draft_ext(row) for row in self.draft_joint(inst).rows])
        return replacement_residuals(inst.target_rows, rows)

    def _misses(self, inst: Instance) -> FloatArray:
        """P(draft j is rejected) = sum_x (q_j(x) - min(p_j(x), q_j(x))), summed (no 1 - x)."""
        rows = np.array([draft_ext(row) for row in self.draft_joint(inst).rows])
        _, hits, _ = self._sequence(inst)
        return (rows - hits).sum(axis=1)

    def acceptance(self, inst: Instance) -> float:
        _, hits, _ = self._sequence(inst)
        misses = self._misses(inst)
        stay = np.concatenate([[1.0], np.cumprod(misses)[:-1]])
        return float(stay @ hits.sum(axis=1))

    def local_output(self, inst: Instance) -> FloatArray:
        _, hits, final = self._sequence(inst)
        stay = np.concatenate([[1.0], np.cumprod(self._misses(inst))])
        return stay[:-1] @ hits + stay[-1] * final

    def _candidates(self, inst: Instance, drafts: IntArray) -> tuple[FloatArray, FloatArray]:
        accept, _, final = self._sequence(inst)
        return accept[np.arange(drafts.shape[1]), drafts], final

    def local_conditionals(self, inst: Instance, members: IntArray) -> FloatArray:
        return sequential_conditionals(members, *self._candidates(inst, members))

    def _verify(self, inst: Instance, drafts: IntArray, rng: np.random.Generator) -> IntArray:
        return sequential_verify(drafts, *self._candidates(inst, drafts), rng)


def without_replacement_walk(
    p: FloatArray, q: FloatArray, drafts: IntArray
) -> tuple[FloatArray, FloatArray]:
    """Algorithm 1 (without replacement) on each drafted tuple: (accept (m, n), final (m, K))."""
    m, n = drafts.shape
    rows = np.arange(m)
    target = np.tile(p, (m, 1))
    draft = np.tile(q, (m, 1))
    accept = np.empty((m, n))
    for j in range(n):
        x = drafts[:, j]
        accept[:, j] = ratio_accept(target[rows, x], draft[rows, x])
        target = residual(target, draft)
        draft = _remove(draft, rows, x)
    return accept, target


def _remove(draft: FloatArray, rows: IntArray, tokens: IntArray) -> FloatArray:
    """Zero one token per row and renormalise (q(x_i) <- 0; q <- norm(q))."""
    draft = draft.copy()
    draft[rows, tokens] = 0.0
    total = draft.sum(axis=1, keepdims=True)
    return draft / np.where(total > 0, total, 1.0)


class RecursiveRejectionWithoutReplacement(DraftThenVerify):
    name = "rrs_without_replacement"
    description = (
        "recursive rejection sampling without replacement, RRSw ([SpecHub] Algorithm 1); "
        "draws n distinct drafts from q"
    )
    joint_kind = "without_replacement"

    def prefix_tree(self, inst: Instance) -> tuple[float, FloatArray]:
        """Exact (acceptance, output law) summed over the tree of rejected prefixes."""
        self.draft_joint(inst)  # validates n against the draft support
        target = inst.target_rows[None, :]
        draft = draft_ext(inst.q_local)[None, :]
        reach = np.ones(1)
        acceptance, output = 0.0, np.zeros(inst.k + 1)
        for level in range(inst.n):
            accepted = np.minimum(target, draft)  # P(draft x and accept x | node)
            acceptance += float(reach @ accepted.sum(axis=1))
            output += reach @ accepted
            following = residual(target, draft)
            if level == inst.n - 1:
                output += (reach * (draft - accepted).sum(axis=1)) @ following
                break
            rejected = draft - accepted  # P(draft x and reject x | node)
            node, token = np.nonzero(rejected > 0)
            check_size(f"RRSw prefix tree (level {level + 2})", node.shape[0] * (inst.k + 1))
            reach = reach[node] * rejected[node, token]
            target = following[node]
            draft = _remove(draft[node], np.arange(node.shape[0]), token)
        return acceptance, output

    def acceptance(self, inst: Instance) -> float:
        return self.prefix_tree(inst)[0]

    def local_output(self, inst: Instance) -> FloatArray:
        return self.prefix_tree(inst)[1]

    def _walk(self, inst: Instance, drafts: IntArray) -> tuple[FloatArray, FloatArray]:
        return without_replacement_walk(inst.target_rows, draft_ext(inst.q_local), drafts)

    def local_conditionals(self, inst: Instance, members: IntArray) -> FloatArray:
        return sequential_conditionals(members, *self._walk(inst, members))

    def _verify(self, inst: Instance, drafts: IntArray, rng: np.random.Generator) -> IntArray:
        return sequential_verify(drafts, *self._walk(inst, drafts), rng)
