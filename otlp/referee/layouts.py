"""Engines' verification layouts as referee protocols: the referee's drafted trees handed to a
sampler in the tensors an engine's verifier takes, its outputs read back as the accepted path
and the bonus token ([GBV]'s emitted sequence), so an engine's function is refereed as it is.

:data:`LAYOUTS` (``protocol=`` of :func:`otlp.referee.referee`, ``--protocol`` of
``otlp referee``); ``B`` rows per call, ``k`` or ``L`` drafts deep, vocabulary ``V``:

* ``chain`` — vLLM's rejection sampler, FlashInfer's ``chain_speculative_sampling``, otlp's
  :func:`otlp.decoding.verify_chain` (whose positional order it keeps):
  ``sampler(draft_token_ids (B, k), target_probs (B, k + 1, V), draft_probs (B, k, V), rng)``
  returns ``output_token_ids`` (B, k + 1): the accepted drafts, then the recovered or bonus
  token, padded with -1 (:data:`~otlp.verification.engine_layouts.PLACEHOLDER_TOKEN_ID`), or
  ``(output_token_ids, num_accepted)`` (the emitted drafts per row, checked against the ids).
  Chains only. The target's extra row is the bonus position; no draft row exists there.
* ``paths`` — EAGLE's and Medusa's ``evaluate_posterior``: one tree per call as its
  root-to-leaf candidate paths, ``sampler(candidates (P, L + 1), logits (P, L + 1, V),
  draft_probs (P, L, V), rng, temperature=, top_k=, top_p=)`` returns ``(best_candidate,
  accept_length, bonus)``: path ``best_candidate``'s first ``accept_length`` drafts are
  accepted. Column 0 of ``candidates`` is the last verified token (0 here), shorter paths are
  padded with -1; ``logits[j, i]`` is the target's at the context after path j's first i
  drafts (padded rows repeat the path's last), ``draft_probs[j, i]`` the law path j's draft
  i + 1 was drawn from.
* ``sglang_tree`` — SGLang's ``tree_speculative_sampling_target_only`` arguments, B trees of one
  shape per call, node 0 the root and node i + 1 otlp's node i:
  ``sampler(candidates (B, N + 1), retrive_index (B, N + 1), retrive_next_token (B, N + 1),
  retrive_next_sibling (B, N + 1), target_probs (B, N + 1, V), draft_probs (B, N + 1, V), rng)``
  returns ``(predicts (B·(N + 1),), accept_index (B, S), accept_token_num (B,))`` as the kernel
  fills them: ``accept_index[b, :accept_token_num[b] + 1]`` the accepted nodes' flat indices
  (``retrive_index``), root first, and ``predicts`` at each the token emitted after it.
  ``retrive_next_token`` is a node's first child, ``retrive_next_sibling`` its next sibling
  (children in increasing node order, -1 none); ``target_probs[b, i]`` / ``draft_probs[b, i]``
  the laws at node i's context (its children were drafted from ``draft_probs[b, i]``).
* ``candidate_logits`` — transformers' ``_speculative_sampling``, one chain per call:
  ``sampler(candidate_input_ids (1, L), candidate_logits (1, L, V), candidate_length,
  new_logits (1, L + 1, V), is_done_candidate, rng)`` returns ``(valid_tokens (1, n + 1),
  n_matches)``. Logits are ``log q`` and ``log p`` (-inf off the support): transformers applies
  its temperature and top-k / top-p before the call. Chains only.

Options, declared as attributes of the sampler (a function's or a callable object's):

* ``logits`` (``chain``: False, ``paths``: True) — the target as logits ``T · log p`` (-inf
  off the support) with keyword arguments ``temperature``, ``top_k``, ``top_p`` (one per row
  for ``chain``, numbers for ``paths``): T is 0.7, 1 or 1.6 by row, ``top_k`` the largest
  support among the row's contexts, ``top_p`` just above 1 minus the smallest target mass
  (1 where that mass is below 1e-3). They keep the whole support, so the law the engine must
  sample is p itself (:func:`otlp.verification.engine_layouts.target_laws` of them), while a
  rule that applies the temperature, the top-k or the top-p wrongly changes it
  (:func:`otlp.referee.logits.keeping`).
* ``truncate = True`` (with ``logits``) — the logits put mass outside p's support and
  ``top_k`` / ``top_p`` remove it (:func:`otlp.referee.logits.truncating`: vLLM's and
  transformers' convention, temperature, then top-k, then top-p keeping the token that crosses
  it); the law to sample is still p, the truncated and renormalised softmax(logits / T), and
  the referee searches cases whose target laws are truncated (V = 3 or 4, zeros at every
  context: :func:`otlp.referee.generate.tree_cases` with ``truncated``).
* ``bonus = "referee"`` — the engine draws the bonus outside the function: ``chain`` samplers
  get ``bonus_token_ids`` (B, 1) drawn by the referee from the target's last row (vLLM's
  argument), ``paths`` samplers return the law to draw the bonus from instead of a token
  (EAGLE's ``sample_p``), drawn by the referee. The verdict says so.
* ``tensors = "torch"`` — every array is handed as a CPU torch tensor (float64, int64); the
  outputs may be numpy or torch either way.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from otlp.referee import logits as engine_logits
from otlp.referee.generators import Generators
from otlp.referee.observe import InvalidOutput
from otlp.solvers.arrays import FloatArray, IntArray
from otlp.tensors import is_torch
from otlp.verification.engine_layouts import PLACEHOLDER_TOKEN_ID

ROOT_TOKEN = 0  # the last verified token of candidates' column 0


@dataclass(frozen=True)
class Layout:
    """One engine layout: its name, the engines that use it, whether it takes chains only, its
    default for ``logits`` and whether ``bonus = "referee"`` applies."""

    name: str
    engines: str
    chains_only: bool
    logits: bool | None  # the default; None = fixed by the layout (not an option)
    referee_bonus: bool


LAYOUTS = {
    "chain": Layout("chain", "vLLM, FlashInfer", True, False, True),
    "paths": Layout("paths", "EAGLE, Medusa", False, True, True),
    "sglang_tree": Layout("sglang_tree", "SGLang", False, None, False),
    "candidate_logits": Layout("candidate_logits", "transformers", True, None, False),
}


@dataclass(frozen=True)
class Options:
    """A layout sampler's declared options (module notes), checked."""

    logits: bool
    bonus: str
    tensors: str
    truncate: bool = False

    @classmethod
    def of(cls, layout: Layout, sampler: object) -> Options:
        """The options ``sampler`` declares for ``layout``; ValueError naming a bad one."""
        logits = getattr(sampler, "logits", None)
        if logits is None:
            logits = bool(layout.logits)
        elif layout.logits is None or not isinstance(logits, bool):
            fixed = "fixed by the layout" if layout.logits is None else "True or False"
            raise ValueError(f"logits: {fixed} for the {layout.name} layout, got {logits!r}")
        bonus = getattr(sampler, "bonus", None) or "sampler"
        if bonus not in ("sampler", "referee") or (bonus == "referee" and not layout.referee_bonus):
            choices = "sampler or referee" if layout.referee_bonus else "sampler"
            raise ValueError(
                f"bonus: expected {choices} for the {layout.name} layout, got {bonus!r}"
            )
        tensors = getattr(sampler, "tensors", None) or "numpy"
        if tensors not in ("numpy", "torch"):
            raise ValueError(f"tensors: expected numpy or torch, got {tensors!r}")
        truncate = getattr(sampler, "truncate", None) or False
        if not isinstance(truncate, bool):
            raise ValueError(f"truncate: expected True or False, got {truncate!r}")
        if truncate and not logits:
            raise ValueError(
                f"truncate: needs logits=True (the {layout.name} layout hands probabilities here)"
            )
        return cls(logits, str(bonus), str(tensors), truncate)

    def note(self, layout: Layout) -> str:
        """What the verdict says about the call beyond the layout's name."""
        notes = []
        if self.truncate:
            notes.append(
                "the target came as logits whose top-k / top-p remove mass (truncate = True); "
                "judged against the truncated, renormalised softmax(logits / T)"
            )
        if self.bonus == "referee" and layout.name == "chain":
            notes.append(
                "the bonus token was drawn by the referee from the target's last row "
                "(bonus_token_ids)"
            )
        elif self.bonus == "referee":
            notes.append(
                "the bonus token was drawn by the referee from the law the sampler returned"
            )
        return "; ".join(notes)

    def logits_of(self, tokens: IntArray, p: FloatArray) -> tuple[FloatArray, dict[str, Any]]:
        """The rows' target as logits and sampling parameters (module notes)."""
        convert = engine_logits.truncating if self.truncate else engine_logits.keeping
        return convert(tokens, p)


class LayoutSampler:
    """A sampler of an engine layout as a batched tree sampler of the referee
    (:mod:`otlp.referee.observe`): ``(tokens (B, N), parents (N,), p, q (B, N + 1, V), rng)
    -> (nodes (B, L) padded with -1, bonus (B,))``."""

    protocol = "tree"
    batched = True

    def __init__(self, sampler: Callable[..., Any], layout: str, generators: Generators) -> None:
        self.sampler, self.layout, self.generators = sampler, LAYOUTS[layout], generators
        self.options = Options.of(self.layout, sampler)
        self.max_children = 1 if self.layout.chains_only else None

    def __call__(
        self, tokens: IntArray, parents: IntArray, p: FloatArray, q: FloatArray, rng: Any
    ) -> tuple[IntArray, IntArray]:
        tree = _Tree(parents)
        if self.layout.chains_only and not tree.is_chain:
            raise ValueError(f"the {self.layout.name} layout takes chains, got parents {parents}")
        call = {
            "chain": self._chain,
            "paths": self._paths,
            "sglang_tree": self._sglang,
            "candidate_logits": self._candidate_logits,
        }[self.layout.name]
        return call(tokens, tree, p, q, rng)

    def _hand(self, value: Any) -> Any:
        """An input array as the sampler takes it (numpy, or a CPU torch tensor)."""
        if self.options.tensors == "torch" and isinstance(value, np.ndarray):
            import torch

            return torch.from_numpy(np.ascontiguousarray(value))
        return value

    def _call(self, rows: int, rng: Any, *args: Any, **kwargs: Any) -> Any:
        handed = [self._hand(a) for a in args]
        extra = {k: self._hand(v) for k, v in kwargs.items()}
        return self.sampler(*handed, self.generators.for_call(rng, rows), **extra)

    def _chain(
        self, tokens: IntArray, tree: _Tree, p: FloatArray, q: FloatArray, rng: Any
    ) -> tuple[IntArray, IntArray]:
        rows, k = tokens.shape
        kwargs: dict[str, Any] = {}
        target: FloatArray = p
        if self.options.logits:
            target, kwargs = self.options.logits_of(tokens, p)
        if self.options.bonus == "referee":
            kwargs["bonus_token_ids"] = _draw_rows(p[:, k], rng)[:, None]
        out = self._call(rows, rng, tokens.copy(), target, q[:, :k].copy(), **kwargs)
        counts = None
        if isinstance(out, tuple | list):
            if len(out) != 2:
                raise InvalidOutput("expected output_token_ids or (output_token_ids, num_accepted)")
            out, counts = out
        ids = _ints("output_token_ids", out, (rows, k + 1))
        valid = ids != PLACEHOLDER_TOKEN_ID
        accepted = valid.sum(axis=1) - 1
        _padded_at_end("output_token_ids", valid)
        if np.any(accepted < 0):
            raise InvalidOutput("output_token_ids: a row emits no token")
        if counts is not None and not np.array_equal(
            _ints("num_accepted", counts, (rows,)), accepted
        ):
            raise InvalidOutput("num_accepted disagrees with the tokens in output_token_ids")
        column = np.arange(k)[None, :]
        drafted = column < accepted[:, None]
        if np.any(drafted & (ids[:, :k] != tokens)):
            raise InvalidOutput("output_token_ids: an accepted position is not the drafted token")
        nodes = np.where(drafted, column, -1)
        return nodes, ids[np.arange(rows), accepted]

    def _paths(
        self, tokens: IntArray, tree: _Tree, p: FloatArray, q: FloatArray, rng: Any
    ) -> tuple[IntArray, IntArray]:
        rows = tokens.shape[0]
        paths = tree.leaf_paths()
        depth = max(len(path) for path in paths)
        contexts = np.zeros((len(paths), depth + 1), dtype=np.int64)  # padded: the last again
        candidates = np.full((len(paths), depth + 1), PLACEHOLDER_TOKEN_ID, dtype=np.int64)
        candidates[:, 0] = ROOT_TOKEN
        for j, path in enumerate(paths):
            contexts[j, 1:] = np.array(path + [path[-1]] * (depth - len(path))) + 1
        nodes = np.full((rows, depth), -1, dtype=np.int64)
        bonus = np.empty(rows, dtype=np.int64)
        for b in range(rows):
            for j, path in enumerate(paths):
                candidates[j, 1 : len(path) + 1] = tokens[b, path]
            target, kwargs = p[b][contexts], {}
            if self.options.logits:
                logits, sampling = self.options.logits_of(tokens[b : b + 1], p[b : b + 1])
                target = logits[0][contexts]
                kwargs = {key: value.item() for key, value in sampling.items()}
            out = self._call(1, rng, candidates.copy(), target, q[b][contexts[:, :depth]], **kwargs)
            try:
                best, length, last = out
            except (TypeError, ValueError):
                raise InvalidOutput("expected (best_candidate, accept_length, bonus)") from None
            best, length = _index("best_candidate", best), _index("accept_length", length)
            if not 0 <= best < len(paths) or not 0 <= length <= len(paths[best]):
                raise InvalidOutput(
                    f"best_candidate {best}, accept_length {length}: not a prefix of a path"
                )
            nodes[b, :length] = paths[best][:length]
            if self.options.bonus == "referee":
                bonus[b] = _draw_rows(_law("bonus law", last, p.shape[2])[None], rng)[0]
            else:
                bonus[b] = _index("bonus", last)
        return nodes, bonus

    def _sglang(
        self, tokens: IntArray, tree: _Tree, p: FloatArray, q: FloatArray, rng: Any
    ) -> tuple[IntArray, IntArray]:
        rows, count = tokens.shape[0], tokens.shape[1] + 1
        candidates = np.concatenate([np.full((rows, 1), ROOT_TOKEN), tokens], axis=1)
        index = np.arange(rows * count, dtype=np.int64).reshape(rows, count)
        first, sibling = tree.first_child_next_sibling()
        out = self._call(
            rows,
            rng,
            candidates,
            index,
            np.repeat(first[None], rows, axis=0),
            np.repeat(sibling[None], rows, axis=0),
            p.copy(),
            q.copy(),
        )
        try:
            predicts_out, accept_out, num_out = out
        except (TypeError, ValueError):
            raise InvalidOutput("expected (predicts, accept_index, accept_token_num)") from None
        predicts = _ints("predicts", predicts_out, (rows * count,))
        num = _ints("accept_token_num", num_out, (rows,))
        accept = _ints("accept_index", accept_out, None)
        if accept.ndim != 2 or accept.shape[0] != rows:
            raise InvalidOutput(f"accept_index: expected ({rows}, S), got {accept.shape}")
        nodes = np.full((rows, tree.depth), -1, dtype=np.int64)
        bonus = np.empty(rows, dtype=np.int64)
        for b in range(rows):
            a = int(num[b])
            if not 0 <= a < min(accept.shape[1], tree.depth + 1):
                raise InvalidOutput(f"accept_token_num[{b}] = {a}: not a path of the tree")
            local = accept[b, : a + 1] - b * count
            path = [int(v) - 1 for v in local[1:]]
            if local[0] != 0 or not tree.is_path(path):
                raise InvalidOutput(f"accept_index[{b}]: {accept[b].tolist()} is not a root path")
            emitted = predicts[accept[b, : a + 1]]
            if np.any(emitted[:a] != candidates[b, local[1:]]):
                raise InvalidOutput(f"predicts: row {b}'s accepted nodes are not their tokens")
            nodes[b, :a] = path
            bonus[b] = emitted[a]
        return nodes, bonus

    def _candidate_logits(
        self, tokens: IntArray, tree: _Tree, p: FloatArray, q: FloatArray, rng: Any
    ) -> tuple[IntArray, IntArray]:
        rows, length = tokens.shape
        nodes = np.full((rows, length), -1, dtype=np.int64)
        bonus = np.empty(rows, dtype=np.int64)
        with np.errstate(divide="ignore"):
            draft_logits, target_logits = np.log(q[:, :length]), np.log(p)
        for b in range(rows):
            out = self._call(
                1,
                rng,
                tokens[b : b + 1].copy(),
                draft_logits[b : b + 1],
                length,
                target_logits[b : b + 1],
                False,
            )
            try:
                valid_out, matches = out
            except (TypeError, ValueError):
                raise InvalidOutput("expected (valid_tokens, n_matches)") from None
            n = _index("n_matches", matches)
            valid = _ints("valid_tokens", valid_out, None).reshape(-1)
            if not 0 <= n <= length or valid.shape[0] != n + 1:
                raise InvalidOutput(f"n_matches {n} with valid_tokens {valid.tolist()}")
            if np.any(valid[:n] != tokens[b, :n]):
                raise InvalidOutput("valid_tokens: an accepted position is not the drafted token")
            nodes[b, :n] = np.arange(n)
            bonus[b] = valid[n]
        return nodes, bonus


class _Tree:
    """A tree shape (``parents``, :mod:`otlp.verification.shapes`) read as engines lay it out."""

    def __init__(self, parents: IntArray) -> None:
        self.parents = np.asarray(parents, dtype=np.int64)
        size = self.parents.shape[0]
        self.is_chain = bool(np.array_equal(self.parents, np.arange(size) - 1))
        self.children = [np.flatnonzero(self.parents == node).tolist() for node in range(-1, size)]
        depth = np.zeros(size, dtype=np.int64)
        for i, parent in enumerate(self.parents):
            depth[i] = 1 if parent < 0 else depth[parent] + 1
        self.depth = int(depth.max(initial=0))

    def leaf_paths(self) -> list[list[int]]:
        """Root-to-leaf node lists, leaves in increasing order."""
        paths = []
        for leaf in range(self.parents.shape[0]):
            if self.children[leaf + 1]:
                continue
            path = [leaf]
            while self.parents[path[0]] >= 0:
                path.insert(0, int(self.parents[path[0]]))
            paths.append(path)
        return paths

    def first_child_next_sibling(self) -> tuple[IntArray, IntArray]:
        """SGLang's ``retrive_next_token`` and ``retrive_next_sibling`` over nodes 0..N (0 the
        root, i + 1 node i), children in increasing order, -1 for none."""
        size = self.parents.shape[0] + 1
        first = np.full(size, -1, dtype=np.int64)
        sibling = np.full(size, -1, dtype=np.int64)
        for node, kids in enumerate(self.children):
            if kids:
                first[node] = kids[0] + 1
            for one, after in itertools.pairwise(kids):
                sibling[one + 1] = after + 1
        return first, sibling

    def is_path(self, nodes: list[int]) -> bool:
        """Whether ``nodes`` is a root-to-node path of the tree."""
        previous = -1
        for node in nodes:
            if not 0 <= node < self.parents.shape[0] or self.parents[node] != previous:
                return False
            previous = node
        return True


def _draw_rows(laws: FloatArray, rng: Any) -> IntArray:
    """One token per row of ``laws`` (B, V) drawn with the referee's ``rng``: inverse CDF on
    one uniform a row for a numpy Generator, ``choice`` (branching) under the exact mode."""
    laws = laws / laws.sum(axis=1, keepdims=True)
    if isinstance(rng, np.random.Generator):
        cdf = np.cumsum(laws, axis=1)
        uniforms = np.asarray(rng.random(laws.shape[0]), dtype=np.float64)
        picks = (cdf < uniforms[:, None] * cdf[:, -1:]).sum(axis=1)
        return np.minimum(picks, laws.shape[1] - 1).astype(np.int64)
    return np.array([rng.choice(laws.shape[1], p=row) for row in laws], dtype=np.int64)


def _numpy(value: Any) -> np.ndarray:
    return value.detach().cpu().numpy() if is_torch(value) else np.asarray(value)


def _ints(name: str, value: Any, shape: tuple[int, ...] | None) -> IntArray:
    """An integer output as int64 numpy, of ``shape`` if given; InvalidOutput otherwise."""
    arr = _numpy(value)
    if not np.issubdtype(arr.dtype, np.integer) or (shape is not None and arr.shape != shape):
        want = "int" if shape is None else f"int {shape}"
        raise InvalidOutput(f"{name}: expected {want}, got {arr.dtype} {arr.shape}")
    return arr.astype(np.int64)


def _index(name: str, value: Any) -> int:
    """A single integer output (a Python int, a numpy or a torch scalar)."""
    arr = _numpy(value)
    if arr.size != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise InvalidOutput(f"{name}: expected an integer, got {value!r}")
    return operator.index(arr.reshape(()).item())


def _law(name: str, value: Any, vocab: int) -> FloatArray:
    """A returned distribution over the vocabulary as float64; InvalidOutput otherwise."""
    arr = _numpy(value).astype(np.float64).reshape(-1)
    if arr.shape != (vocab,) or not np.all(arr >= 0) or abs(arr.sum() - 1.0) > 1e-4:
        raise InvalidOutput(f"{name}: expected a distribution over {vocab} tokens")
    return arr


def _padded_at_end(name: str, valid: NDArray[np.bool_]) -> None:
    if np.any(valid[:, 1:] & ~valid[:, :-1]):
        raise InvalidOutput(f"{name}: the -1 padding must end each row")
