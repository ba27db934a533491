"""The speculative decoding loop: draft a tree, score it with one target forward, verify, commit.

One step for the active rows of a batch ([SpecHub] §3, [GBV] Algorithm 1, [GR] Appendix R):

1. **Draft** depth by depth: at every frontier node the draft model gives its law q, and the
   node's children in the static tree (``parents``) are drawn by the draft ``scheme``
   (:func:`otlp.verification.drafting.sample_children`: i.i.d., without replacement, SpecHub's
   hub joint); a node whose parent is absent in a row is absent too (token ``-1``). The
   draft's laws at the deepest nodes are not needed and are not computed.
2. **Target**: one forward over the whole tree (the model's tree attention mask or its own
   batching) gives p at the root and at every node.
3. **Verify** with :func:`otlp.verification.tree.verify_tree` (any lossless method: node-by-node
   single-step rules or the path methods ``block`` / ``gbv``): the accepted path and the bonus
   token, so every step emits ``accepted + 1`` tokens.
4. **Commit** the tokens to both sessions; a KV cache keeps the accepted nodes' entries.

``method="ar"`` is plain autoregressive sampling from the target through the same session and
cache: the baseline of every speed-up. Temperature 0 (greedy) is the models' business (one-hot
laws), so every method decodes greedily then. Each row has its own generator (spawned from
``seed``), so a row's tokens do not depend on the batch it runs in.

The result keeps, per step, the rows, the tokens each emitted and the seconds spent drafting,
in the target forward and verifying: block efficiency (tokens per target call) with its
standard error, tokens per second and the share of time verifying come from there. Nothing
else grows with the decode: the sessions hold the committed tokens and their cache only.
"""

from __future__ import annotations

import numbers
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from otlp.args import canonical_name, integers, positive_int
from otlp.decoding.models.base import TreeModel, TreeSession, check_model
from otlp.solvers.arrays import FloatArray, IntArray

AUTOREGRESSIVE = "ar"


@dataclass(frozen=True)
class Step:
    """One target call: the rows it served, the tokens each emitted, where the time went."""

    rows: IntArray
    emitted: IntArray
    draft_s: float
    target_s: float
    verify_s: float


@dataclass
class DecodeResult:
    """Generated tokens per row (prompt excluded) and the per-step accounting."""

    tokens: list[list[int]]
    steps: list[Step] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def target_calls(self) -> int:
        return len(self.steps)

    def emitted(self) -> IntArray:
        """Tokens emitted by every (step, row) pair, in order."""
        if not self.steps:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([s.emitted for s in self.steps])

    @property
    def block_efficiency(self) -> float:
        """Mean tokens per target call and row (accepted drafts + 1)."""
        per = self.emitted()
        return float(per.mean()) if per.size else float("nan")

    @property
    def block_efficiency_se(self) -> float:
        """Standard error of :attr:`block_efficiency` over the (step, row) pairs."""
        per = self.emitted()
        return float(per.std(ddof=1) / np.sqrt(per.size)) if per.size > 1 else float("nan")

    @property
    def generated(self) -> int:
        return sum(len(t) for t in self.tokens)

    @property
    def draft_s(self) -> float:
        return sum(s.draft_s for s in self.steps)

    @property
    def target_s(self) -> float:
        return sum(s.target_s for s in self.steps)

    @property
    def verify_s(self) -> float:
        return sum(s.verify_s for s in self.steps)

    @property
    def tokens_per_s(self) -> float:
        return self.generated / self.wall_s if self.wall_s > 0 else float("nan")

    @property
    def verify_share(self) -> float:
        """Share of the decode's wall time spent in verification."""
        return self.verify_s / self.wall_s if self.wall_s > 0 else float("nan")


@dataclass(frozen=True)
class Speculation:
    """How a step drafts and verifies: the static tree, the draft scheme, the method.

    ``parents`` is the tree (``parents[i] < i``, ``-1`` = child of the root); ``method`` a
    method of :func:`otlp.verification.tree.verify_tree` or ``"ar"``; ``scheme`` how a node's
    children are drafted (None: the method's own, :mod:`otlp.verification.rule_table`);
    ``top_k`` restricts the single-step rules to the draft's top k ([GR] Appendix N); a k at
    least the vocabulary size keeps the whole vocabulary.
    """

    method: str
    parents: IntArray
    scheme: str | None = None
    top_k: int | None = None

    @classmethod
    def paths(
        cls,
        method: str,
        paths: int,
        depth: int,
        *,
        scheme: str | None = None,
        top_k: int | None = None,
    ) -> Speculation:
        """K = ``paths`` draft paths of L = ``depth`` tokens (:func:`path_tree`)."""
        from otlp.verification.shapes import path_tree

        paths = positive_int("paths", paths)
        depth = positive_int("depth", depth)
        return cls(method, path_tree(paths, depth), scheme=scheme, top_k=top_k)

    @classmethod
    def autoregressive(cls) -> Speculation:
        return cls(AUTOREGRESSIVE, np.zeros(0, dtype=np.int64))


def decode(
    target: TreeModel,
    draft: TreeModel | None,
    prompts: Sequence[Sequence[int]],
    speculation: Speculation,
    *,
    max_new_tokens: int = 64,
    stop_tokens: Sequence[int] = (),
    seed: int | Sequence[int] = 0,
) -> DecodeResult:
    """Generate up to ``max_new_tokens`` per prompt (fewer when a stop token is emitted; it is
    kept) by speculative decoding of ``target`` with ``draft`` (see the module docstring).

    ``seed``: one seed (rows get spawned generators) or one per row.
    """
    from otlp.verification.rule_table import RULES
    from otlp.verification.shapes import check_parents

    if not isinstance(speculation, Speculation):
        raise ValueError(f"speculation: expected a Speculation, got {type(speculation).__name__}")
    method = canonical_name(speculation.method, "speculation.method")
    if method != AUTOREGRESSIVE and method not in RULES:
        raise ValueError(
            f"speculation.method: expected ar or one of {', '.join(RULES)}, got {method!r}"
        )
    scheme = speculation.scheme
    if method != AUTOREGRESSIVE and scheme is None:
        scheme = RULES[method].default_scheme
    elif method != AUTOREGRESSIVE and scheme not in RULES[method].schemes:
        raise ValueError(
            f"speculation.scheme: method {method!r} verifies children drafted "
            f"{' or '.join(RULES[method].schemes)}, got {scheme!r}"
        )
    max_new = positive_int("max_new_tokens", max_new_tokens)
    vocab = check_model("target", target)
    if draft is not None and check_model("draft", draft) != vocab:
        raise ValueError(
            f"draft: vocabulary size {draft.vocab_size} differs from the target's {vocab}"
        )
    prompts = _token_lists("prompts", prompts, vocab)
    if not prompts:
        raise ValueError("prompts: need at least one prompt")
    parents = check_parents(speculation.parents, name="speculation.parents")
    if method != AUTOREGRESSIVE and (draft is None or parents.size == 0):
        raise ValueError("draft: speculative methods need a draft model and a non-empty tree")
    if speculation.top_k is not None and speculation.top_k >= vocab:
        speculation = replace(speculation, top_k=None)  # the top V tokens: all of them
    rngs = _generators(seed, len(prompts))
    stops = set(integers("stop_tokens", stop_tokens, minimum=0))
    result = DecodeResult(tokens=[[] for _ in prompts])
    started = time.perf_counter()
    tgt = target.session(prompts)
    dft = draft.session(prompts) if draft is not None and method != AUTOREGRESSIVE else None
    active = np.arange(len(prompts))
    while active.size:
        if dft is None:
            new, step = _autoregressive_step(tgt, active, [rngs[r] for r in active])
        else:
            new, step = _speculative_step(tgt, dft, active, speculation, method, scheme, rngs)
        result.steps.append(step)
        still = []
        for r, row in enumerate(active):
            out = result.tokens[row]
            for token in new[r][: max_new - len(out)]:
                out.append(token)
                if token in stops:
                    break
            if len(out) < max_new and out[-1] not in stops:
                still.append(row)
        active = np.array(still, dtype=np.int64)
    result.wall_s = time.perf_counter() - started
    return result


def _autoregressive_step(
    tgt: TreeSession, active: IntArray, rngs: list[np.random.Generator]
) -> tuple[list[list[int]], Step]:
    empty = np.zeros((active.size, 0), dtype=np.int64)
    t0 = time.perf_counter()
    p = tgt.forward(empty, np.zeros(0, dtype=np.int64), active)[:, 0]
    tokens = sample_rows(p, rngs)
    tgt.commit(active, [[int(t)] for t in tokens], [[] for _ in active])
    t1 = time.perf_counter()
    # Sampling the token is part of an autoregressive step: no verification.
    step = Step(active, np.ones(active.size, dtype=np.int64), 0.0, t1 - t0, 0.0)
    return [[int(t)] for t in tokens], step


def _speculative_step(
    tgt: TreeSession,
    dft: TreeSession,
    active: IntArray,
    spec: Speculation,
    method: str,
    scheme: str | None,
    rngs: list[np.random.Generator],
) -> tuple[list[list[int]], Step]:
    from otlp.verification.tree import verify_tree

    parents = spec.parents
    n_nodes, batch = parents.size, active.size
    row_rngs = [rngs[r] for r in active]
    t0 = time.perf_counter()
    tokens, q, fed = draft_tree(dft, active, parents, str(scheme), spec.top_k, row_rngs)
    t1 = time.perf_counter()
    p = tgt.forward(tokens, parents, active)
    unfed = np.setdiff1d(np.arange(n_nodes), np.fromiter(fed, dtype=np.int64, count=len(fed)))
    q[:, unfed + 1] = p[:, unfed + 1]  # laws after the deepest nodes: never used by a rule
    t2 = time.perf_counter()
    result = verify_tree(
        tokens, parents, p, q, method=method, scheme=scheme, top_k=spec.top_k, rng=row_rngs
    )
    t3 = time.perf_counter()
    new: list[list[int]] = []
    paths: list[list[int]] = []
    for r in range(batch):
        path = [int(n) for n in np.asarray(result.path_nodes[r]) if n >= 0]
        paths.append(path)
        new.append([int(tokens[r, n]) for n in path] + [int(result.bonus_token[r])])
    tgt.commit(active, new, paths)
    t4 = time.perf_counter()
    dft.commit(active, new, [_fed_prefix(path, fed) for path in paths])
    t5 = time.perf_counter()
    emitted = np.array([len(n) for n in new], dtype=np.int64)
    step = Step(active, emitted, (t1 - t0) + (t5 - t4), (t2 - t1) + (t4 - t3), t3 - t2)
    return new, step


def draft_tree(
    dft: TreeSession,
    active: IntArray,
    parents: IntArray,
    scheme: str,
    top_k: int | None,
    rngs: list[np.random.Generator],
) -> tuple[IntArray, FloatArray, dict[int, int]]:
    """Step 1 of the loop for the rows ``active`` of the draft session ``dft``: the tree
    ``parents`` drafted depth by depth (children by ``scheme`` from the draft's law, or its
    top ``top_k``; row b with ``rngs[b]``). Returns the drafted tokens ``(B, N)``, the draft
    laws ``(B, N + 1, V)`` (the rows after the deepest nodes are left for the caller: no rule
    reads them) and the draft session's step id of every node it was fed."""
    from otlp.verification.drafting import sample_children

    batch, n_nodes = active.size, parents.size
    depth = node_depths(parents)
    tokens = np.full((batch, n_nodes), -1, dtype=np.int64)
    root = dft.forward(np.zeros((batch, 0), np.int64), np.zeros(0, np.int64), active)
    q = np.empty((batch, n_nodes + 1, root.shape[-1]))
    q[:, 0] = root[:, 0]
    fed: dict[int, int] = {}  # tree node -> the draft session's step numbering
    for d in range(1, int(depth.max()) + 1):
        level = np.flatnonzero(depth == d)
        for parent in np.unique(parents[level]):
            children = level[parents[level] == parent]
            law = q[:, parent + 1]
            draws = _draft_children(sample_children, law, children.size, scheme, rngs, top_k)
            if parent >= 0:
                draws[tokens[:, parent] < 0] = -1
            tokens[:, children] = draws
        if d < depth.max():
            ids = [fed[int(parents[n])] if parents[n] >= 0 else -1 for n in level]
            laws = dft.forward(tokens[:, level], np.array(ids, dtype=np.int64), active)
            q[:, level + 1] = laws[:, 1:]
            for n in level:
                fed[int(n)] = len(fed)
    return tokens, q, fed


def _draft_children(
    sample_children: Callable[..., IntArray],
    law: FloatArray,
    count: int,
    scheme: str,
    rngs: list[np.random.Generator],
    top_k: int | None,
) -> IntArray:
    """``count`` children of one node per row ``(B, count)``. Without replacement a row whose
    draft law (under ``top_k``) has fewer tokens of positive probability than ``count`` (a
    greedy draft at temperature 0, a top-k below the branching) drafts every one of them and
    leaves the other children absent (-1), as a decoder does, instead of failing mid-run."""
    batch = law.shape[0]
    support = np.count_nonzero(law > 0, axis=1)
    if top_k is not None:
        support = np.minimum(support, top_k)
    if scheme != "without_replacement" or bool((support >= count).all()):
        draws = sample_children(law, count, scheme, rngs, top_k=top_k)
        return np.asarray(draws, dtype=np.int64).reshape(batch, count)
    out = np.full((batch, count), -1, dtype=np.int64)
    for b in range(batch):
        drawn = min(count, int(support[b]))
        out[b, :drawn] = sample_children(law[b : b + 1], drawn, scheme, [rngs[b]], top_k=top_k)[0]
    return out


def _fed_prefix(path: list[int], fed: dict[int, int]) -> list[int]:
    """The draft session's ids of the accepted nodes it has in its cache (a root-down prefix)."""
    out = []
    for node in path:
        if node not in fed:
            break
        out.append(fed[node])
    return out


def node_depths(parents: IntArray) -> IntArray:
    """Depth of every node (children of the root have depth 1)."""
    depth = np.zeros(parents.size, dtype=np.int64)
    for i, parent in enumerate(parents):
        depth[i] = 1 if parent < 0 else depth[parent] + 1
    return depth


def sample_rows(laws: FloatArray, rngs: Sequence[np.random.Generator]) -> IntArray:
    """One token per row of ``laws`` ``(B, V)``, row b by inverse CDF with ``rngs[b]``."""
    cdf = np.cumsum(laws, axis=1)
    u = np.array([rng.random() for rng in rngs]) * cdf[:, -1]
    out = np.array([np.searchsorted(c, x, side="right") for c, x in zip(cdf, u, strict=True)])
    return np.minimum(out, laws.shape[1] - 1).astype(np.int64)


def _token_lists(name: str, values: object, vocab: int) -> list[tuple[int, ...]]:
    """``values`` (a sequence of token-id sequences) as tuples of ids in [0, vocab), or a
    ``ValueError`` naming the first bad one (``prompts[b]`` or ``prompts[b][i]``)."""
    if isinstance(values, str | bytes) or not isinstance(values, Sequence | np.ndarray):
        raise ValueError(f"{name}: expected a sequence of token-id sequences, got {values!r}")
    rows = [integers(f"{name}[{b}]", row, minimum=0) for b, row in enumerate(values)]
    for b, row in enumerate(rows):
        for i, token in enumerate(row):
            if token >= vocab:
                raise ValueError(f"{name}[{b}][{i}]: token id {token} outside [0, {vocab})")
    return rows


def _generators(seed: object, rows: int) -> list[np.random.Generator]:
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        root = np.random.SeedSequence(positive_int("seed", seed, minimum=0))
        return [np.random.default_rng(s) for s in root.spawn(rows)]
    seeds = integers("seed", seed, minimum=0)
    if len(seeds) != rows:
        raise ValueError(f"seed: expected one seed or {rows} (one per prompt), got {len(seeds)}")
    return [np.random.default_rng(s) for s in seeds]
