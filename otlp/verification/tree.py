"""Verifying a batch of draft trees after the target forward: the accepted path and the bonus
token per row.

Node-by-node methods (SpecTr / SpecInfer traversal, [GR] Appendix R): starting at the root,
the present children of the current node carry the drafted tokens omega; a single-step rule
with p, q = the target and draft laws at the node's context draws the next token y from its
conditional law pi(. | omega). If y is a child's token the walk moves there, otherwise y is
the correction token and the walk stops; at a node without children y ~ p is the bonus. With
i.i.d. drafting, children of equal tokens share their context, so the walk merges them and
verifies the union of their children (n i.i.d. drafts; duplicates between the K paths of a
path tree). Each step keeps the token's marginal equal to p at that context, so the emitted
tokens follow the target ([GR] Theorem R.1; to 15 tau per step for global resolution).

The rules, their protocols (node, path, sequence) and the drafting schemes each verifies are
declared once in :mod:`otlp.verification.rule_table` (:data:`METHODS`, :data:`SCHEMES_OF` and
the per-protocol lists here are read from it):

* node rules draw each node's token with the kernel registered for them
  (:mod:`otlp.verification.node_steps`): speculative sampling, RRS with and without
  replacement, K-SEQ, SpecHub, global resolution (the compiled per-row paths of
  ``otlp.verify_drafts``, on the rows as given where its fused kernel applies), exact
  optimal transport by max-flow, partial resolution (the race's exact law given the drafted
  tuple);
* path rules on :func:`~otlp.verification.shapes.path_tree` shapes verify one chain (block
  verification, [GBV] §2.1) or the path GBV selects among K i.i.d. paths ([GBV] §5) with the
  rule's stop law (:mod:`otlp.multistep.single_path`), sampled by
  :func:`otlp.solvers.node_rules.path_token` where that law is block verification's;
* sequence rules test whole sequences from the leaves to the root (Traversal Verification,
  Weng et al., NeurIPS 2025, arXiv 2505.12398; :mod:`otlp.multistep.traversal`; on one chain
  it is block verification), in numpy on the checked float64 rows they visit.

The rules without top-k run compiled on the rows as given (:mod:`otlp.solvers.node_rules`): sps,
rrs, rrs without replacement, K-SEQ and SpecHub node by node, block chain by chain, every row
of the batch in one call where the input is readable as given; GBV path by path.

Each row's randomness comes from its own uniforms (:func:`otlp.verification.drafting.row_uniforms`),
so with one generator per row a row's outcome does not depend on its batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otlp.args import canonical_name, positive_int
from otlp.global_resolution.rows import GlobalResolutionRows
from otlp.multistep import single_path
from otlp.multistep.gbv import check_ranking, local_key, select_path, skewed_conditionals
from otlp.solvers.arrays import FloatArray, IntArray
from otlp.solvers.node_rules import (
    block_walk,
    buckets_work,
    draw_scaled,
    node_token,
    node_walk,
    path_token,
)
from otlp.solvers.row_status import RowStatus
from otlp.tensors import as_index_array
from otlp.verification import rule_table
from otlp.verification import shapes as trees
from otlp.verification.drafting import SCHEMES, restrict_top_k, row_uniforms
from otlp.verification.engine_layouts import PLACEHOLDER_TOKEN_ID, LogitLaws
from otlp.verification.laws import ContextLaws
from otlp.verification.node_steps import draw, node_law
from otlp.verification.position_schemes import method_tau
from otlp.verification.rule_table import VerificationRule, node_kernel

# The rule table's lists (otlp.verification.rule_table), by protocol.
NODE_METHODS = rule_table.names("node")
PATH_METHODS = rule_table.names("path")
SEQUENCE_METHODS = rule_table.names("sequence")  # whole sequences, tested leaves to root
METHODS = rule_table.names()
SCHEMES_OF = rule_table.schemes_of()


@dataclass(frozen=True)
class TreeVerification:
    """The outcome per row: ``num_accepted`` (B,), the accepted nodes ``path_nodes`` (B, D)
    and their tokens ``path_tokens`` (B, D) (-1 padded; D = the tree's depth, the deepest
    row's with a shape per row), and the
    ``bonus_token`` (B,) drawn after the accepted path (correction or bonus): every row emits
    ``num_accepted + 1`` tokens, listed in ``output_ids`` (B, D + 1) padded with -1 (the
    engines' layout). Arrays are numpy, or torch tensors on the input's device."""

    num_accepted: Any
    path_nodes: Any
    path_tokens: Any
    bonus_token: Any
    method: str
    scheme: str
    output_ids: Any  # (B, D + 1): emitted tokens, then PLACEHOLDER_TOKEN_ID (-1), as vLLM

    def tokens_out(self, b: int) -> Any:
        """Row ``b``'s emitted tokens: the accepted path, then the bonus token."""
        count = int(self.num_accepted[b])
        head = self.path_tokens[b, :count]
        tail = self.bonus_token[b : b + 1]
        if isinstance(head, np.ndarray):
            return np.concatenate([head, tail])
        import torch

        return torch.cat([head, tail])


def verify_chain(
    tokens: Any,
    p: Any,
    q: Any,
    *,
    method: str | None = None,
    scheme: str | None = None,
    top_k: int | None = None,
    tau: float | None = None,
    rng: object = None,
    atol: float | None = None,
    ranking: str = "ratio",
    temperature: ArrayLike | None = None,
    target_top_k: ArrayLike | None = None,
    target_top_p: ArrayLike | None = None,
) -> TreeVerification:
    """:func:`verify_tree` on a single draft path per row, in otlp's layout or the engines'.

    ``tokens`` (B, L); ``p`` (B, L + 1, V); ``q`` (B, L + 1, V) or (B, L, V) (vLLM's and
    FlashInfer's draft probabilities: no draft law after the last draft token). With
    ``temperature`` (a number or one per row; 0 = greedy), ``p`` holds the target's logits
    and the target law is softmax(p / temperature) restricted to ``target_top_k`` /
    ``target_top_p`` (:func:`otlp.verification.engine_layouts.target_laws`), as the engine
    samples, computed only at the contexts the verification reads
    (:class:`~otlp.verification.engine_layouts.LogitLaws`). ``rng`` may also hold a
    ``torch.Generator`` per row, as a list or as a dict {row: generator} of seeded requests.
    The result's ``output_ids`` (B, L + 1) are the emitted tokens padded with -1, beside
    ``num_accepted``. ``method`` None: ``sps`` (one draft per position, where exact optimal
    transport is speculative sampling's law: the default of every decoder call, see
    :func:`verify_tree`). The other keywords as :func:`verify_tree`; ``tau`` only for global
    resolution.
    """
    arr, _ = as_index_array("tokens", tokens, ndims=(2,))
    if temperature is not None:
        p = LogitLaws(p, temperature, target_top_k, target_top_p, prefix="target_")
    elif target_top_k is not None or target_top_p is not None:
        name = "target_top_k" if target_top_k is not None else "target_top_p"
        raise ValueError(f"{name}: the target's top-k/top-p apply to logits; pass temperature too")
    task = _Task.of(
        arr,
        trees.chain(arr.shape[1]),
        p,
        q,
        "sps" if method is None else method,
        scheme,
        top_k,
        tau,
        atol,
        ranking,
        draft_last_optional=True,
    )
    return _verify(task, rng)


def verify_tree(
    tokens: Any,
    parents: ArrayLike,
    p: Any,
    q: Any,
    *,
    method: str | None = None,
    scheme: str | None = None,
    top_k: int | None = None,
    tau: float | None = None,
    rng: object = None,
    atol: float | None = None,
    ranking: str = "ratio",
) -> TreeVerification:
    """Verify a batch of draft trees: the accepted path and the bonus token per row.

    Parameters
    ----------
    tokens:
        (B, N) int token ids, node i's drafted token per row; -1 marks a node absent in that
        row (its descendants must be absent too). Numpy or torch.
    parents:
        (N,) the shared tree shape (:mod:`otlp.verification.shapes`), ``parents[i] < i``, -1 = root;
        or (B, N), one shape per row (rows of a batch drafted as different trees).
    p, q:
        (B, N + 1, V) target and draft laws at the contexts: index 0 the root, index i + 1
        node i's. numpy float16/float32/float64/bfloat16 or torch tensors (any device).
        Only the visited contexts are read; each must sum to 1 within ``atol`` (default by
        precision: 1e-6 float64, 1e-4 float32, 1e-2 float16, 2e-2 bfloat16) and is
        renormalised in float64. ``q`` must be the law the drafts were drawn from.
    method:
        One of :data:`METHODS`. None: exact optimal transport at each node for the scheme,
        as every decoder call's default (:func:`otlp.verification.rule_table.optimal_method`:
        ``partial_resolution`` for i.i.d. children, ``global_resolution`` without
        replacement, ``spechub`` for its hub pairs).
    scheme:
        How the children were drafted (:data:`otlp.verification.drafting.SCHEMES`); None = the
        method's own (without_replacement for ``rrs_without_replacement``, spechub for
        ``spechub``, else iid). :data:`SCHEMES_OF` lists the valid pairs.
    top_k:
        Restrict each draft law to its top-k tokens ([GR] Appendix N), ties broken towards
        the drafted tokens then lower ids (as :func:`~otlp.decoding.sample_children`); None
        uses ``q`` as given (pass your own restricted law there).
    tau:
        Global resolution's error threshold (each step within 15 tau of p in L1); None =
        :data:`otlp.global_resolution.row_options.DEFAULT_TAU`. The other methods are exact
        and take no ``tau``: passing one is a ``ValueError`` naming it and the method.
    rng:
        One seed / ``numpy.random.Generator`` / ``torch.Generator`` for the batch, a sequence
        with one per row, or a dict {row: generator} (seeded requests; the other rows draw
        from fresh entropy).
    ranking:
        GBV's local path ranking (:data:`otlp.multistep.gbv.RANKINGS`).

    Returns
    -------
    TreeVerification
        Per row: ``num_accepted``, the accepted nodes ``path_nodes`` and their tokens
        ``path_tokens`` (a root-to-node path of the tree, -1 padded), the ``bonus_token``,
        ``output_ids`` (the emitted tokens, -1 padded); ``tokens_out(b)`` gives row b's
        ``num_accepted + 1`` emitted tokens.

    Raises
    ------
    ValueError
        Naming the argument: unknown method or a scheme it does not verify, a parent array
        out of topological order, token ids out of range or present under an absent parent,
        a draft of zero draft probability, laws off their sums, ``rng`` of the wrong length.

    Examples
    --------
    Two draft paths of two tokens (nodes 0 -> 1 and 2 -> 3), one row, vocabulary of 3:

    >>> import numpy as np
    >>> from otlp.decoding import path_tree, verify_tree
    >>> p = np.array([[[0.6, 0.3, 0.1], [0.2, 0.7, 0.1], [0.3, 0.3, 0.4],
    ...                [0.5, 0.25, 0.25], [0.1, 0.1, 0.8]]])
    >>> q = np.full((1, 5, 3), 1 / 3)
    >>> result = verify_tree(np.array([[0, 1, 2, 0]]), path_tree(2, 2), p, q,
    ...                      method="rrs", rng=[1])
    >>> result.path_nodes.tolist(), result.tokens_out(0).tolist()
    ([[0, 1]], [0, 1, 1])
    """
    parents = trees.parents_array(parents)
    if parents.ndim == 2:
        return _verify_shapes(tokens, parents, p, q, method, scheme, top_k, tau, atol, ranking, rng)
    task = _Task.of(tokens, parents, p, q, method, scheme, top_k, tau, atol, ranking)
    return _verify(task, rng)


def _verify(task: _Task, rng: object) -> TreeVerification:
    """Run a checked task over its rows with their uniforms."""
    rows = task.tokens.shape[0]
    uniforms = row_uniforms(rng, rows, task.uniform_count)
    accepted = np.full((rows, task.depth), -1, dtype=np.int64)
    bonus = np.empty(rows, dtype=np.int64)
    task.run(uniforms, accepted, bonus, np.arange(rows))
    return _result(task, task.tokens, accepted, bonus)


def _verify_shapes(
    tokens: Any,
    parents: ArrayLike,
    p: Any,
    q: Any,
    method: str | None,
    scheme: str | None,
    top_k: int | None,
    tau: float | None,
    atol: float | None,
    ranking: str,
    rng: object,
) -> TreeVerification:
    """:func:`verify_tree` with a tree shape per row (``parents`` (B, N)): one task per
    distinct shape over the whole batch, the other rows' drafts masked absent there (so the
    rows keep their indices, in reads and in error messages); each row's uniforms drawn once
    for the batch, as wide as the widest shape needs."""
    tok, _ = as_index_array("tokens", tokens, ndims=(2,))
    shapes = trees.parents_array(parents)
    if shapes.shape[0] != tok.shape[0]:
        raise ValueError(
            f"parents: expected shape (N,) or (B = {tok.shape[0]}, N), got {shapes.shape}"
        )
    distinct, group = np.unique(shapes, axis=0, return_inverse=True)
    group = group.reshape(-1)
    tasks = []
    for g in range(distinct.shape[0]):
        masked = np.where((group == g)[:, None], tok, -1)
        tasks.append(_Task.of(masked, distinct[g], p, q, method, scheme, top_k, tau, atol, ranking))
    rows = tok.shape[0]
    uniforms = row_uniforms(rng, rows, max(task.uniform_count for task in tasks))
    depth = max(task.depth for task in tasks)
    accepted = np.full((rows, depth), -1, dtype=np.int64)
    bonus = np.empty(rows, dtype=np.int64)
    for g, task in enumerate(tasks):
        mine = np.flatnonzero(group == g)
        part = np.full((rows, task.depth), -1, dtype=np.int64)
        drawn = np.empty(rows, dtype=np.int64)
        task.run(np.ascontiguousarray(uniforms[:, : task.uniform_count]), part, drawn, mine)
        accepted[mine, : task.depth] = part[mine]
        bonus[mine] = drawn[mine]
    return _result(tasks[0], tok, accepted, bonus)


def _result(task: _Task, tok: IntArray, accepted: IntArray, bonus: IntArray) -> TreeVerification:
    """The outcome arrays from the accepted nodes and bonus tokens, in the input's kind."""
    rows, depth = accepted.shape
    counts = (accepted >= 0).sum(axis=1)
    path_tokens = np.full_like(accepted, -1)
    hit = accepted >= 0
    path_tokens[hit] = tok[np.nonzero(hit)[0], accepted[hit]]
    output = np.full((rows, depth + 1), PLACEHOLDER_TOKEN_ID, dtype=np.int64)
    output[:, :depth] = path_tokens
    output[np.arange(rows), counts] = bonus
    kind = task.target.kind
    return TreeVerification(
        kind.wrap(counts),
        kind.wrap(accepted),
        kind.wrap(path_tokens),
        kind.wrap(bonus),
        task.step.method,
        task.step.scheme,
        kind.wrap(output),
    )


def outcome_law(
    tokens: ArrayLike,
    parents: ArrayLike,
    p: ArrayLike,
    q: ArrayLike,
    *,
    method: str | None = None,
    scheme: str | None = None,
    top_k: int | None = None,
    tau: float | None = None,
    atol: float | None = None,
    ranking: str = "ratio",
) -> dict[tuple[int, ...], float]:
    """Exact law of one row's emitted tokens (accepted path + bonus) given its drafted tree.

    ``tokens`` (N,), ``p``, ``q`` (N + 1, V); other arguments as :func:`verify_tree`, which
    samples from this law (global resolution's steps by its compiled kernel, equal to the
    object API's slices used here to rounding). Summed over the drafts' own law it gives
    the method's output law, which for a lossless method is the target's.
    """
    row = as_index_array("tokens", tokens, ndims=(1,))[0][None, :]
    task = _Task.of(
        row,
        parents,
        np.asarray(p)[None],
        np.asarray(q)[None],
        method,
        scheme,
        top_k,
        tau,
        atol,
        ranking,
    )
    return task.law(0)


def _tree_scheme(scheme: str | None) -> str:
    """``scheme`` canonical (None: ``iid``) if children may be drafted so, else a ValueError."""
    name = canonical_name("iid" if scheme is None else scheme, "scheme")
    if name not in SCHEMES:
        raise ValueError(f"scheme: expected one of {', '.join(SCHEMES)}, got {scheme!r}")
    return name


def _scheme_for(rule: VerificationRule, scheme: str | None) -> str:
    if scheme is None:
        return rule.default_scheme
    scheme = canonical_name(scheme, "scheme")
    if scheme not in rule.schemes:
        raise ValueError(
            f"scheme: method {rule.name!r} verifies children drafted "
            f"{' or '.join(rule.schemes)}, got {scheme!r}"
        )
    return scheme


def _check_tokens(tokens: Any, parents: IntArray) -> IntArray:
    arr, _ = as_index_array("tokens", tokens, ndims=(2,))
    if arr.shape[1] != parents.shape[0]:
        raise ValueError(f"tokens: expected shape (B, N = {parents.shape[0]}), got {arr.shape}")
    if arr.size and arr.min() < -1:
        b, i = np.argwhere(arr < -1)[0]
        raise ValueError(f"tokens[{b}, {i}]: {arr[b, i]} is neither a token id nor -1 (absent)")
    has_parent = parents >= 0
    orphan = (arr >= 0) & has_parent[None, :] & (arr[:, np.maximum(parents, 0)] < 0)
    if orphan.any():
        b, i = np.argwhere(orphan)[0]
        raise ValueError(
            f"tokens[{b}, {i}]: node {i} is present but its parent {parents[i]} is absent (-1)"
        )
    return arr


@dataclass(frozen=True)
class _Task:
    """A checked verification problem: tree, tokens, laws and the method's step."""

    parents: IntArray
    tokens: IntArray
    target: ContextLaws
    draft: ContextLaws
    step: _Step
    ranking: str
    kids: list[IntArray]
    depth: int
    width: int  # uniforms per level: one per candidate (at most a level's nodes) and two more
    path_grid: tuple[int, int]  # (K, L) of a path method's path tree
    kid_start: IntArray  # context c's children: concatenated kids[kid_start[c]:kid_start[c + 1]]
    scratch: _Scratch

    @classmethod
    def of(
        cls,
        tokens: Any,
        parents: ArrayLike,
        p: Any,
        q: Any,
        method: str | None,
        scheme: str | None,
        top_k: int | None,
        tau: float | None,
        atol: float | None,
        ranking: str,
        *,
        draft_last_optional: bool = False,
    ) -> _Task:
        if method is None:  # exact OT at each node for the scheme (every call's default)
            method = rule_table.optimal_method(_tree_scheme(scheme))
        rule = rule_table.get(method)
        method = rule.name
        scheme = _scheme_for(rule, scheme)
        ranking = check_ranking(ranking)
        shape = trees.check_parents(parents)
        tok = _check_tokens(tokens, shape)
        rows, nodes = tok.shape
        target = ContextLaws("p", p, (rows, nodes + 1), atol)
        draft = ContextLaws("q", q, (rows, nodes + 1), atol, last_optional=draft_last_optional)
        if draft.vocab != target.vocab:
            raise ValueError(f"q: vocabulary size {draft.vocab} differs from p's {target.vocab}")
        if tok.size and tok.max() >= target.vocab:
            b, i = np.argwhere(tok >= target.vocab)[0]
            raise ValueError(f"tokens[{b}, {i}]: token id {tok[b, i]} outside [0, {target.vocab})")
        if top_k is not None:
            top_k = positive_int("top_k", top_k, maximum=target.vocab)
        tau = GlobalResolutionRows.checked(method_tau(method, tau)).tau
        path_grid = _path_shape(shape, rule) if rule.protocol == "path" else (0, 0)
        step = _Step(method, scheme, top_k, tau)
        levels = trees.depth(shape)
        depth = int(levels.max()) if shape.shape[0] else 0
        width = int(np.bincount(levels).max()) + 2 if shape.shape[0] else 2
        kids = trees.children(shape)
        kid_start = np.concatenate([[0], np.cumsum([k.shape[0] for k in kids])]).astype(np.int64)
        return cls(
            shape,
            tok,
            target,
            draft,
            step,
            ranking,
            kids,
            depth,
            width,
            path_grid,
            kid_start,
            _Scratch(),
        )

    @property
    def uniform_count(self) -> int:
        """Uniforms per row: ``width`` per level of the tree, and one level more."""
        return (self.depth + 1) * self.width

    def run(self, u: FloatArray, accepted: IntArray, bonus: IntArray, rows: IntArray) -> None:
        """Verify ``rows`` (all rows by a compiled walk where one applies, else those row by
        row) into ``accepted`` and ``bonus``."""
        if not self.walk(u, accepted, bonus):
            for b in rows:
                nodes, bonus[b] = self.sample(int(b), u[b])
                accepted[b, : nodes.shape[0]] = nodes

    def walk(self, u: FloatArray, accepted: IntArray, bonus: IntArray) -> bool:
        """All rows at once by a compiled walk where it applies: a compiled node rule
        (:data:`_NODE_RULES`, :func:`otlp.solvers.node_rules.node_walk`) or block verification
        (:func:`otlp.solvers.node_rules.block_walk`), without top-k, on rows readable as given
        (numpy or CPU torch float32/float64). False otherwise."""
        step = self.step
        chain_walk = step.rule.max_paths == 1 and step.rule.stop_law is single_path.block
        if step.top_k is not None or not (step.rule.compiled or chain_walk):
            return False
        p, q = self.target.native_all(), self.draft.native_all()
        if p is None or q is None:
            return False
        shape = (self.tokens.shape[0], self.parents.shape[0] + 1)
        p_totals, q_totals = np.full(shape, -1.0), np.full(shape, -1.0)
        error = np.zeros(5, dtype=np.int64)
        atols = np.array([self.target.atol, self.draft.atol])
        if chain_walk:
            block_walk(p, q, self.tokens, u, atols, p_totals, q_totals, accepted, bonus, error)
            self._raise(error)
            return True
        work, removed = self.scratch.buffers(p.shape[2])
        assert step.rule.compiled is not None
        rule, max_drafts = step.rule.compiled
        node_walk(
            p,
            q,
            self.tokens,
            self.kid_start,
            np.concatenate(self.kids),
            self.parents,
            rule,
            max_drafts,
            step.scheme == "iid",
            step.scheme == "without_replacement",
            u,
            self.width,
            atols,
            p_totals,
            q_totals,
            work,
            removed,
            accepted,
            bonus,
            error,
        )
        self._raise(error)
        return True

    def _raise(self, error: IntArray) -> None:
        """The ``ValueError`` of a compiled walk's error (code, row, context, token, other)."""
        step = self.step
        code, b, context, token, other = (int(e) for e in error)
        if code == RowStatus.BAD_DRAFT and step.rule.protocol == "path":  # context: its node
            raise ValueError(
                f"tokens[{b}, {context}]: token {token} has draft probability 0 where drafted "
                "(or is outside the top-k draft)"
            )
        if code == RowStatus.BAD_TARGET_ROW:
            self.target.refuse(b, context)
        if code == RowStatus.BAD_DRAFT_ROW:
            self.draft.refuse(b, context)
        if code == RowStatus.BAD_DRAFT:
            _check_drafts(b, context, step, np.array([token]), np.array([False]), None)
        if code == RowStatus.REPEATED:
            _check_drafts(b, context, step, np.array([token, token]), np.array([True, True]), None)
        if code == RowStatus.TOO_MANY:
            many = np.zeros(token, dtype=np.int64)
            _check_drafts(b, context, step, many, np.ones(token, dtype=bool), None)
        if code == RowStatus.NOT_HUB:
            pair = np.array([token, other])
            _check_drafts(b, context, step, pair, np.array([True, True]), -1)

    def sample(self, b: int, u: FloatArray) -> tuple[IntArray, int]:
        """Row b's accepted nodes and bonus token from its uniforms ``u``."""
        protocol = self.step.rule.protocol
        if protocol == "sequence":
            return self._traversal_sample(b, u)
        if protocol == "path" and self.step.top_k is None and self.step.compiled_path():
            return self._path_sample(b, u)
        if protocol == "path":
            nodes, stops, root = self._path_stops(b)
            if stops is None:
                return nodes, draw(root, float(u[0]))
            accepted = draw(stops.stop[0], float(u[0]))
            return nodes[:accepted], draw(stops.correction[0, accepted], float(u[1]))
        row = self.tokens[b]

        def verified(context: int, omega: IntArray, level: int) -> int:
            mine = u[level * self.width : (level + 1) * self.width]
            if omega.shape[0] == 0:
                row = self.target.native(b, context)
                return draw_scaled(row, self.target.total(b, context, row), float(mine[0]))
            if self.step.compiled():
                return self._compiled_token(b, context, omega, mine)
            if self.step.fused():
                token = self._fused_token(b, context, omega, mine)
                if token >= 0:
                    return token
            p = self.target.row(b, context)
            q = _checked_draft(b, context, self.draft, self.step, omega)
            return self.step.token(p, q, omega, mine)

        state = [-1]
        level = 0
        while True:
            cands = self._candidates(row, state)
            y = verified(state[0] + 1, row[cands], level)
            matched = cands[row[cands] == y]
            if matched.shape[0] == 0:
                break
            state = self._next_state(matched)
            level += 1
        nodes = trees.ancestors(self.parents, state[0]) if state[0] >= 0 else _NO_NODES
        return nodes, y

    def law(self, b: int) -> dict[tuple[int, ...], float]:
        """Exact law of row b's emitted tokens (see :func:`outcome_law`)."""
        out: dict[tuple[int, ...], float] = {}
        rule = self.step.rule
        if rule.protocol == "sequence":
            assert rule.sequence_law is not None
            for test, mass in rule.sequence_law(*self._traversal_args(b)):
                nodes = self._path_to(test.node)
                owed = self.target.row(b, test.node + 1) if test.owed is None else test.owed
                _spread(out, tuple(int(t) for t in self.tokens[b, nodes]), mass, owed)
            return out
        if rule.protocol == "path":
            nodes, stops, root = self._path_stops(b)
            if stops is None:
                _spread(out, (), 1.0, root)
                return out
            path = tuple(int(t) for t in self.tokens[b, nodes])
            for accepted, mass in enumerate(stops.stop[0]):
                _spread(out, path[:accepted], float(mass), stops.correction[0, accepted])
            return out
        row = self.tokens[b]
        pending: list[tuple[list[int], tuple[int, ...], float]] = [([-1], (), 1.0)]
        while pending:
            state, prefix, mass = pending.pop()
            cands = self._candidates(row, state)
            omega = row[cands]
            p = self.target.row(b, state[0] + 1)
            law = p
            if omega.shape[0]:
                q = _checked_draft(b, state[0] + 1, self.draft, self.step, omega)
                law = self.step.law(p, q, omega)
            for y in np.flatnonzero(law > 0):
                matched = cands[omega == y]
                if matched.shape[0] == 0:
                    _spread(out, prefix, mass * law[y], None, int(y))
                else:
                    pending.append((self._next_state(matched), (*prefix, int(y)), mass * law[y]))
        return out

    def _compiled_token(self, b: int, context: int, omega: IntArray, u: FloatArray) -> int:
        """A compiled rule's token read from the rows as given (:func:`node_token`)."""
        p = self.target.native(b, context)
        q = self.draft.native(b, context)
        p_total = self.target.total(b, context, p)
        q_total = self.draft.total(b, context, q)
        _check_drafts(b, context, self.step, omega, q[omega] > 0, None)
        assert self.step.rule.compiled is not None
        rule, max_drafts = self.step.rule.compiled
        work, removed = self.scratch.buffers(p.shape[0])
        wor = self.step.scheme == "without_replacement"
        token = int(
            node_token(rule, p, q, p_total, q_total, omega[:max_drafts], wor, u, work, removed)
        )
        if token < 0:
            _check_drafts(b, context, self.step, omega, np.ones(2, dtype=bool), -1)
        return token

    def _fused_token(self, b: int, context: int, omega: IntArray, u: FloatArray) -> int:
        """The token by the rule's fused kernel (:attr:`NodeKernel.fused
        <otlp.verification.rule_table.NodeKernel>`) on the rows as given: the kernel checks
        them, restricts q to its top-k and renormalises both rows itself (ties at the k-th
        value are broken by token id there, towards the drafts in :func:`restrict_top_k`: the
        node then takes the restricted path, which agrees whenever both keep the drafts). -1
        where a drafted token is outside the kernel's top-k or a row fails the kernel's check
        at the tighter of the two laws' tolerances (the restricted path checks each at its
        own, and names the row in its error)."""
        p = self.target.native(b, context)
        q = self.draft.native(b, context)
        atol = min(self.target.atol, self.draft.atol)
        _check_drafts(b, context, self.step, omega, np.ones(1, dtype=bool), None)
        fused = node_kernel(self.step.method).fused
        assert fused is not None
        return fused(p, q, omega, self.step.scheme, self.step.tau, u, self.step.top_k, atol)

    def _path_sample(self, b: int, u: FloatArray) -> tuple[IntArray, int]:
        """Block verification of row b's chain, or of GBV's selected path against its skewed
        draft, on the rows as given (:func:`otlp.solvers.node_rules.path_token`): the levels below
        the accepted prefix are read only for their path entries and sums, the bonus row only
        when the whole path is accepted."""
        if not self.step.rule.selects_path:
            chosen, paths = _chain_of(self.tokens[b]), 1
        else:
            chosen, paths = _selected_path(
                b, self.tokens[b], self.path_grid, self.target, self.draft, self.step, self.ranking
            )
        if chosen is None:
            return _NO_NODES, self._draw_target(b, 0, float(u[0]))
        nodes, contexts, path = chosen
        steps = path.shape[0]
        p, p_index = self.target.native_rows(b, contexts[:steps])
        q, q_index = self.draft.native_rows(b, contexts[:steps])
        p_totals = _totals(self.target, b, contexts[:steps], p, p_index)
        q_totals = _totals(self.draft, b, contexts[:steps], q, q_index)
        on_path = q[q_index, path]
        if np.any(on_path <= 0):
            d = int(np.flatnonzero(on_path <= 0)[0])
            raise ValueError(
                f"tokens[{b}, {nodes[d]}]: token {path[d]} has draft probability 0 where "
                "drafted (or is outside the top-k draft)"
            )
        inverse = self.ranking == "inverse-ratio"
        work = self.scratch.buckets(p.shape[1] if paths > 1 else 0)
        accepted, token = path_token(
            p, q, p_index, q_index, p_totals, q_totals, path, paths, inverse, work, u[0], u[1]
        )
        if token < 0:
            token = self._draw_target(b, int(contexts[steps]), float(u[1]))
        return nodes[:accepted], int(token)

    def _traversal_args(self, b: int) -> tuple[Any, ...]:
        """Row b's present children per context, tokens and (checked, top-k restricted) laws
        for :mod:`otlp.multistep.traversal`, and whether its siblings are drafted without
        replacement."""
        row = self.tokens[b]
        kids = [k[row[k] >= 0] for k in self.kids]

        def draft(context: int) -> FloatArray:
            return _checked_draft(b, context, self.draft, self.step, row[kids[context]])

        def target(context: int) -> FloatArray:
            return self.target.row(b, context)

        wor = self.step.scheme == "without_replacement"
        return kids, row, target, draft, wor

    def _traversal_sample(self, b: int, u: FloatArray) -> tuple[IntArray, int]:
        """Traversal Verification of row b: test k accepts where ``u[k]`` is below its
        probability (the root's last test always accepts); the bonus token from ``u[-1]``
        (the uniforms per row outnumber the nodes: :attr:`uniform_count`)."""
        kids, row, target, draft, wor = self._traversal_args(b)
        assert self.step.rule.tests is not None
        for k, test in enumerate(self.step.rule.tests(kids, row, target, draft, wor)):
            if test.node < 0 or u[k] < test.accept:
                break
        if test.owed is None:
            return self._path_to(test.node), self._draw_target(b, test.node + 1, float(u[-1]))
        return self._path_to(test.node), draw(test.owed, float(u[-1]))

    def _path_to(self, node: int) -> IntArray:
        return trees.ancestors(self.parents, node) if node >= 0 else _NO_NODES

    def _draw_target(self, b: int, context: int, u: float) -> int:
        row = self.target.native(b, context)
        return int(draw_scaled(row, self.target.total(b, context, row), u))

    def _candidates(self, row: IntArray, state: list[int]) -> IntArray:
        cands = np.concatenate([self.kids[s + 1] for s in state])
        return cands[row[cands] >= 0]

    def _next_state(self, matched: IntArray) -> list[int]:
        """All children carrying the verified token (i.i.d. drafts: one shared context whose
        children are all i.i.d. drafts), else the first of them."""
        return [int(m) for m in matched] if self.step.scheme == "iid" else [int(matched[0])]

    def _path_stops(self, b: int) -> tuple[IntArray, single_path.StopLaw | None, FloatArray]:
        """Block verification's stop law on row b's chain, or on GBV's selected path: (that
        path's nodes, stop law, root target law); no stop law when the row has no drafts."""
        return _path_stops(
            b, self.tokens[b], self.path_grid, self.target, self.draft, self.step, self.ranking
        )


_NO_NODES = np.zeros(0, dtype=np.int64)


def _spread(
    out: dict[tuple[int, ...], float],
    prefix: tuple[int, ...],
    mass: float,
    law: FloatArray | None,
    token: int | None = None,
) -> None:
    """Add ``mass`` x ``law`` over bonus tokens after ``prefix`` (or ``mass`` at one token)."""
    if mass <= 0.0:
        return
    items = [(token, 1.0)] if law is None else [(int(y), law[y]) for y in np.flatnonzero(law > 0)]
    for y, share in items:
        key = (*prefix, int(y))  # type: ignore[arg-type]
        out[key] = out.get(key, 0.0) + mass * float(share)


# ----- one node: a rule's conditional law and its draw --------------------------------------
@dataclass(frozen=True)
class _Step:
    method: str
    scheme: str
    top_k: int | None
    tau: float

    @property
    def rule(self) -> VerificationRule:
        return rule_table.RULES[self.method]

    def restrict(self, q: FloatArray, drafted: IntArray) -> FloatArray:
        return restrict_top_k(q[None, :], self.top_k, drafted[None, :])[0]

    def fused(self) -> bool:
        """Whether a node's token comes from the rule's fused kernel on the rows as given
        (:attr:`NodeKernel.fuses <otlp.verification.rule_table.NodeKernel>`)."""
        kernel = node_kernel(self.method)
        return kernel.fuses is not None and kernel.fuses(self.scheme, self.top_k)

    def compiled(self) -> bool:
        """Whether a node runs a compiled rule on the rows as given (no top-k restriction
        to apply)."""
        return self.top_k is None and self.rule.compiled is not None

    def compiled_path(self) -> bool:
        """Whether a path is verified by the compiled block kernels
        (:func:`otlp.solvers.node_rules.path_token`): the rule's stop law is block
        verification's."""
        return self.rule.stop_law is single_path.block

    def law(self, p: FloatArray, q: FloatArray, omega: IntArray) -> FloatArray:
        """pi(. | omega) over the vocabulary (q already restricted and checked)."""
        return node_law(p, q, omega, method=self.method, scheme=self.scheme, tau=self.tau)

    def token(self, p: FloatArray, q: FloatArray, omega: IntArray, u: FloatArray) -> int:
        """The verified token for drafts ``omega`` (n >= 1) from the row's uniforms ``u``
        (n + 2 of them): the rule's kernel run as a procedure, with full-vocabulary work only
        where it is needed (a residual after a rejection), or a compiled kernel."""
        return node_kernel(self.method).token(p, q, omega, self.scheme, self.tau, u)


def _checked_draft(
    b: int, context: int, draft: ContextLaws, step: _Step, omega: IntArray
) -> FloatArray:
    q = step.restrict(draft.row(b, context), omega)
    _check_drafts(b, context, step, omega, q[omega] > 0, int(np.argmax(q)))
    return q


def _check_drafts(
    b: int, context: int, step: _Step, omega: IntArray, possible: NDArray[np.bool_], hub: int | None
) -> None:
    """The drafts ``omega`` at a context: of positive draft probability (``possible``),
    distinct without replacement, at most a SpecHub pair holding the hub (``hub``: argmax q;
    None: not checked here, the compiled rule reports it)."""
    if not possible.all():
        token = int(omega[np.flatnonzero(~possible)[0]])
        raise ValueError(
            f"tokens[{b}]: token {token} was drafted at context {context} where its draft "
            "probability is 0 (or outside the top-k draft)"
        )
    if step.scheme == "without_replacement" and np.unique(omega).shape[0] < omega.shape[0]:
        raise ValueError(f"tokens[{b}]: children drafted without replacement repeat a token")
    if step.method == "spechub" and omega.shape[0] > 2:
        raise ValueError(
            f"parents: SpecHub verifies at most two children per node, got {omega.shape[0]}"
        )
    if step.method == "spechub" and omega.shape[0] == 2 and hub is not None and hub not in omega:
        raise ValueError(
            f"tokens[{b}]: the SpecHub pair {omega.tolist()} at context {context} lacks the hub "
            "argmax q"
        )


class _Scratch:
    """Work buffers of one call's rejection kernels, allocated once per vocabulary size."""

    def __init__(self) -> None:
        self._work: FloatArray | None = None
        self._removed: NDArray[np.bool_] | None = None
        self._buckets: tuple[Any, ...] | None = None

    def buffers(self, vocab: int) -> tuple[FloatArray, NDArray[np.bool_]]:
        if self._work is None or self._removed is None or self._removed.shape[0] != vocab:
            self._work = np.empty((2, vocab))
            self._removed = np.zeros(vocab, dtype=bool)
        return self._work, self._removed

    def buckets(self, vocab: int) -> tuple[Any, ...]:
        """GBV's bucket arrays (:func:`otlp.solvers.node_rules.buckets_work`)."""
        if self._buckets is None or self._buckets[3].shape[0] != vocab:
            self._buckets = buckets_work(vocab)
        return self._buckets


# ----- path methods -------------------------------------------------------------------------
def _path_shape(parents: IntArray, rule: VerificationRule) -> tuple[int, int]:
    nodes = parents.shape[0]
    chained = np.array_equal(parents, np.arange(-1, nodes - 1))  # the common case, at once
    shape = (1, nodes) if chained else trees.path_shape(parents)
    if shape is None:
        raise ValueError(f"parents: method {rule.name!r} verifies path trees (path_tree(K, L))")
    if rule.max_paths == 1 and shape[0] != 1:
        raise ValueError(f"parents: method {rule.name!r} verifies one chain, got {shape[0]} paths")
    return shape


def _totals(
    laws: ContextLaws, b: int, contexts: IntArray, rows: NDArray[np.floating], index: IntArray
) -> FloatArray:
    """The checked sums of the laws at ``contexts`` (``rows[index[i]]`` is context i's)."""
    return np.array([laws.total(b, int(c), rows[i]) for c, i in zip(contexts, index, strict=True)])


def _chain_of(row: IntArray) -> tuple[IntArray, IntArray, IntArray] | None:
    """A row's drafted chain for ``block``: its nodes, contexts (the root's and each node's)
    and tokens; None when the row has no drafts (absent nodes are a suffix of the chain)."""
    steps = int((row >= 0).sum())
    if steps == 0:
        return None
    return np.arange(steps), np.arange(steps + 1), row[:steps]


def _selected_path(
    b: int,
    row: IntArray,
    path_grid: tuple[int, int],
    target: ContextLaws,
    draft: ContextLaws,
    step: _Step,
    ranking: str,
) -> tuple[tuple[IntArray, IntArray, IntArray] | None, int]:
    """Row b's path to verify: (its nodes, contexts (the root's and each node's), tokens),
    None when the row has no drafts; and K, the number of drafted paths.

    GBV selects the highest-ranked path from on-path entries only (O(K L),
    :func:`~otlp.multistep.gbv.select_path`), ranking children by M_b / M_s as given (the
    same ratio up to one factor per context, so the same ranking); the skewed draft ranks by
    the same keys, so both agree bit for bit."""
    paths, length = path_grid
    grid = row.reshape(paths, length)
    lengths = (grid >= 0).sum(axis=1)
    kept = np.flatnonzero(lengths > 0)
    if kept.shape[0] == 0:
        return None, 0
    steps = int(lengths[kept[0]])
    if np.any(lengths[kept] != steps):
        raise ValueError(f"tokens[{b}]: method {step.method!r} needs its paths of equal length")
    toks = grid[kept, :steps]
    nodes = kept[:, None] * length + np.arange(steps)[None, :]
    contexts = np.hstack([np.zeros((kept.shape[0], 1), dtype=np.int64), nodes + 1])
    chosen = 0
    if step.rule.selects_path and kept.shape[0] > 1:
        p_on = target.values_at(b, contexts[:, :-1], toks)
        q_on = draft.values_at(b, contexts[:, :-1], toks)
        if np.any(q_on <= 0):
            k, d = np.argwhere(q_on <= 0)[0]
            raise ValueError(
                f"tokens[{b}, {nodes[k, d]}]: token {toks[k, d]} has draft probability 0 "
                "where drafted"
            )
        chosen = select_path(p_on, q_on, toks, ranking)
    return (nodes[chosen], contexts[chosen], toks[chosen]), kept.shape[0]


def _check_paths_in_top_k(
    b: int, row: IntArray, path_grid: tuple[int, int], draft: ContextLaws, step: _Step
) -> None:
    """Under top-k, every drafted path's tokens must be possible under the top-k draft at
    their context, whichever path is selected (as the node methods require of every draft):
    ties at the k-th value are broken towards the tokens drafted there (at the root, every
    path's first token), then towards lower ids. Refuses the first impossible node."""
    paths, length = path_grid
    grid = row.reshape(paths, length)
    first = grid[:, 0]
    for k in range(paths):
        for d in range(length):
            token = int(grid[k, d])
            if token < 0:
                break
            node = k * length + d
            context = np.array([0 if d == 0 else node])  # node - 1's context is node
            law = draft.checked(b, context, draft.raw(b, context))[0]
            keep = first[first >= 0] if d == 0 else grid[k, d : d + 1]
            if step.restrict(law, keep)[token] <= 0:
                raise ValueError(
                    f"tokens[{b}, {node}]: token {token} has draft probability 0 where "
                    "drafted (or is outside the top-k draft)"
                )


def _path_stops(
    b: int,
    row: IntArray,
    path_grid: tuple[int, int],
    target: ContextLaws,
    draft: ContextLaws,
    step: _Step,
    ranking: str,
) -> tuple[IntArray, single_path.StopLaw | None, FloatArray]:
    """Block verification's stop law on row b's chain, or on GBV's selected path
    (:func:`_selected_path`) against its skewed draft ([GBV] §5), as full float64 laws (the
    exact law, and the sampler under top-k). Only the selected path's laws are read in full
    (and checked), except under top-k, where every path's draft laws are read to check its
    tokens (:func:`_check_paths_in_top_k`)."""
    chosen, paths = _selected_path(b, row, path_grid, target, draft, step, ranking)
    if chosen is None:
        return _NO_NODES, None, target.row(b, 0)
    if step.top_k is not None and paths > 1:
        _check_paths_in_top_k(b, row, path_grid, draft, step)
    nodes, ctx, path = chosen
    steps = path.shape[0]
    first = row.reshape(path_grid)[:, 0]
    raw_p, raw_q = target.raw(b, ctx), draft.raw(b, ctx[:-1])
    tgt, dft = target.checked(b, ctx, raw_p), draft.checked(b, ctx[:-1], raw_q)
    if step.top_k is not None:  # ties towards the tokens drafted there (the root: all paths')
        for d in range(steps):
            dft[d] = step.restrict(dft[d], first[first >= 0] if d == 0 else path[d : d + 1])
    on_path = dft[np.arange(steps), path]
    if np.any(on_path <= 0):
        d = int(np.flatnonzero(on_path <= 0)[0])
        raise ValueError(
            f"tokens[{b}, {nodes[d]}]: token {path[d]} has draft probability 0 where "
            "drafted (or is outside the top-k draft)"
        )
    skewed = dft[None]
    if step.rule.selects_path:
        keys = local_key(raw_p[:steps], raw_q, ranking)
        skewed, _ = skewed_conditionals(
            tgt[None], dft[None], path[None], paths, ranking, keys=keys[None]
        )
    assert step.rule.stop_law is not None
    return nodes, step.rule.stop_law(tgt[None], skewed, path[None]), tgt[0]
