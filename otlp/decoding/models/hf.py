"""A ``transformers`` causal LM as a tree model, with self-speculative drafts sharing its weights.

:class:`HFTreeLM` runs a Llama-style decoder (``model.model.embed_tokens``, ``.layers``,
``.norm``, ``.rotary_emb`` and ``model.lm_head``: Llama, SmolLM2, Mistral, Qwen2) layer by
layer itself, so that

* one forward scores a whole draft tree: the tree's tokens follow the uncommitted context
  tokens in one sequence, each at position ``len(context) + depth - 1``, under a boolean tree
  attention mask (a node sees the committed context, its ancestors and itself) — the
  SpecInfer / Medusa token-tree layout;
* the KV cache is the session's own (one tensor pair per layer and row): after a step it keeps
  the committed tokens plus the accepted nodes' entries (gathered), and drops the rest, so the
  accepted prefix is never recomputed and memory follows the committed length;
* a draft is the same weights with a subset of the decoder layers: ``layers=range(6)`` exits
  early after six layers ([GR] §7 and LayerSkip's self-speculation), ``layers`` without some
  indices skips them (Draft & Verify); each keeps its own cache.

Gemma 3 ([Gemma 3] §2; ``Gemma3ForCausalLM``, text only) runs through the same loop: its
embedding module scales by sqrt(hidden) itself, its decoder layers carry the query/key norms and
the pre/post feed-forward norms, and what the loop adds is read from the model: a rotary
embedding per layer type (local layers at base 10^4, global ones at 10^6: the rotary module
takes the layer type when it has ``layer_types``), a sliding window on the local layers (an
attention module's ``sliding_window``, or the config's for Mistral: a query at position i sees
keys at positions j > i - window, as ``transformers.masking_utils.sliding_window_overlay``) and
the final logit soft-cap ``cap · tanh(logits / cap)`` when the config has one. The window is
applied on positions, not on cache slots: a tree node at depth d sits at ``len(context) + d -
1`` whatever its slot.

Rows of a batch are forwarded one after the other (each has its own cache and length; on a
CPU batching them would save little). ``lm_head`` runs only on the positions whose laws are
asked for. Laws are computed in float64 from the float32 logits.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from otlp.decoding.models.base import check_temperature, greedy
from otlp.solvers.arrays import FloatArray, IntArray


class KVCache:
    """Keys and values per decoder layer for one sequence: what ``LlamaAttention`` calls
    ``past_key_values`` (only :meth:`update` is used by the attention modules)."""

    def __init__(self) -> None:
        self.keys: dict[int, Any] = {}
        self.values: dict[int, Any] = {}

    def update(self, key: Any, value: Any, layer_idx: int, *args: Any, **kwargs: Any) -> Any:
        import torch

        if layer_idx in self.keys:
            key = torch.cat([self.keys[layer_idx], key], dim=-2)
            value = torch.cat([self.values[layer_idx], value], dim=-2)
        self.keys[layer_idx], self.values[layer_idx] = key, value
        return key, value

    def keep(self, index: Sequence[int]) -> None:
        """Keep the cache positions ``index`` (in order), drop every other one."""
        import torch

        if not self.keys:
            return
        length = next(iter(self.keys.values())).shape[-2]
        if list(index) == list(range(len(index))):
            if len(index) == length:
                return
            pick: Any = slice(0, len(index))
            self.keys = {i: k[:, :, pick] for i, k in self.keys.items()}
            self.values = {i: v[:, :, pick] for i, v in self.values.items()}
            return
        at = torch.as_tensor(list(index), dtype=torch.long)
        self.keys = {i: k.index_select(2, at) for i, k in self.keys.items()}
        self.values = {i: v.index_select(2, at) for i, v in self.values.items()}

    def nbytes(self) -> int:
        tensors = (*self.keys.values(), *self.values.values())
        return sum(t.numel() * t.element_size() for t in tensors)


class HFTreeLM:
    """A tree model over a ``transformers`` causal LM (see the module docstring).

    ``layers``: the decoder layers to run (default all); ``temperature``: the law is
    ``softmax(logits / T)``, ``T = 0`` greedy.
    """

    def __init__(
        self,
        model: Any,
        *,
        layers: Iterable[int] | None = None,
        temperature: float = 1.0,
        name: str | None = None,
    ) -> None:
        decoder = model.model
        every = list(decoder.layers)
        chosen = list(range(len(every))) if layers is None else sorted(set(layers))
        if not chosen or chosen[0] < 0 or chosen[-1] >= len(every):
            raise ValueError(f"layers: expected indices in [0, {len(every)}), got {chosen}")
        self.model = model
        self.layer_ids = tuple(chosen)
        self.layers = [every[i] for i in chosen]
        config = model.config
        typed_rope = hasattr(decoder.rotary_emb, "layer_types")
        # Per chosen layer: its rotary kind (None: one rotary embedding for all) and window.
        self.rope_kinds = [
            getattr(layer.self_attn, "layer_type", None) if typed_rope else None
            for layer in self.layers
        ]
        self.windows = [
            getattr(layer.self_attn, "sliding_window", getattr(config, "sliding_window", None))
            for layer in self.layers
        ]
        cap = getattr(config, "final_logit_softcapping", None)
        self.softcap = None if cap is None else float(cap)
        self.vocab_size = int(model.config.vocab_size)
        self.temperature = check_temperature(temperature)
        self.name = name if name is not None else f"{len(chosen)}/{len(every)} layers"

    def session(self, prompts: Sequence[Sequence[int]]) -> HFSession:
        return HFSession(self, prompts)

    def logits(
        self,
        ids: Any,
        positions: Any,
        mask: Any,
        cache: KVCache,
        want: Any,
        key_positions: Any = None,
    ) -> Any:
        """Logits ``(len(want), V)`` of one sequence chunk ``ids`` after ``cache``.

        ``mask`` ``(len(ids), cached + len(ids))`` says which keys each query sees;
        ``key_positions`` are the positions of those keys (default: the cache holds positions
        ``0, 1, ...`` in order, then the chunk's ``positions``), used for sliding windows."""
        import torch

        decoder = self.model.model
        with torch.inference_mode():
            hidden = decoder.embed_tokens(ids[None])
            pos = positions[None]
            ropes = {
                kind: (
                    decoder.rotary_emb(hidden, pos)
                    if kind is None
                    else decoder.rotary_emb(hidden, pos, kind)
                )
                for kind in set(self.rope_kinds)
            }
            masks: dict[Any, Any] = {None: mask[None, None]}
            for window in set(self.windows) - {None}:
                if key_positions is None:
                    before = mask.shape[1] - len(ids)
                    key_positions = torch.cat([torch.arange(before), positions])
                near = positions[:, None] - key_positions[None, :] < window
                masks[window] = (mask & near)[None, None]
            for layer, kind, window in zip(self.layers, self.rope_kinds, self.windows, strict=True):
                hidden = layer(
                    hidden,
                    attention_mask=masks[window],
                    position_ids=pos,
                    past_key_values=cache,
                    use_cache=True,
                    position_embeddings=ropes[kind],
                )
            logits = self.model.lm_head(decoder.norm(hidden[0, want]))
            if self.softcap is not None:
                logits = torch.tanh(logits / self.softcap) * self.softcap
            return logits

    def laws(self, logits: Any) -> FloatArray:
        """Next-token laws (float64 numpy) from logits at this model's temperature."""
        scores = logits.double()
        if self.temperature == 0.0:
            return greedy(scores.numpy())
        return np.asarray((scores / self.temperature).softmax(dim=-1).numpy())

    def prefix_laws(self, prefixes: IntArray) -> FloatArray:
        """Laws after each full prefix (no cache kept): a function of prefixes for
        :class:`otlp.decoding.models.prefix.PrefixLM` (e.g. memoised in the losslessness test)."""
        import torch

        prefixes = np.asarray(prefixes, dtype=np.int64)
        out = np.empty((prefixes.shape[0], self.vocab_size))
        length = prefixes.shape[1]
        mask = torch.ones(length, length, dtype=torch.bool).tril()
        for i, prefix in enumerate(prefixes):
            logits = self.logits(
                torch.as_tensor(prefix), torch.arange(length), mask, KVCache(), [length - 1]
            )
            out[i] = self.laws(logits)[0]
        return out

    def __repr__(self) -> str:
        return f"HFTreeLM({self.name}, V={self.vocab_size}, T={self.temperature:g})"


class _Row:
    """One sequence: committed tokens, its cache (committed prefix + this step's nodes)."""

    def __init__(self, prompt: Sequence[int]) -> None:
        self.tokens = [int(t) for t in prompt]
        if not self.tokens:
            raise ValueError("prompts: every prompt needs at least one token")
        self.cache = KVCache()
        self.cached = 0  # committed tokens held in the cache (a prefix of self.tokens)
        self.slots: dict[int, int] = {}  # this step's node -> cache position
        self.root: FloatArray | None = None


class HFSession:
    """Committed contexts and KV caches of B sequences for one :class:`HFTreeLM`."""

    def __init__(self, model: HFTreeLM, prompts: Sequence[Sequence[int]]) -> None:
        self.model = model
        self.rows = [_Row(p) for p in prompts]
        self.parents: list[int] = []
        self.depths: list[int] = []

    def forward(self, tokens: IntArray, parents: IntArray, rows: IntArray) -> FloatArray:
        import torch

        tokens = np.asarray(tokens, dtype=np.int64).reshape(len(rows), len(parents))
        first, m = len(self.parents), tokens.shape[1]
        for p in parents:
            self.parents.append(int(p))
            self.depths.append(1 if p < 0 else self.depths[int(p)] + 1)
        out = np.empty((len(rows), 1 + m, self.model.vocab_size))
        for r, index in enumerate(rows):
            row = self.rows[index]
            pending = row.tokens[row.cached :] if row.root is None else []
            before = row.cached + len(row.slots)
            n_q = len(pending) + m
            mask = torch.zeros(n_q, before + n_q, dtype=torch.bool)
            committed = row.cached + len(pending)
            if pending:
                mask[: len(pending), :committed] = True
                mask[: len(pending), row.cached : committed].tril_()
            for j in range(m):
                node, query = first + j, len(pending) + j
                mask[query, :committed] = True
                row.slots[node] = before + query
                ancestor = node
                while ancestor >= 0:
                    mask[query, row.slots[ancestor]] = True
                    ancestor = self.parents[ancestor]
            ids = torch.as_tensor([*pending, *np.maximum(tokens[r], 0).tolist()], dtype=torch.long)
            base = len(row.tokens)
            positions = torch.as_tensor(
                [*range(row.cached, base), *(base + self.depths[first + j] - 1 for j in range(m))],
                dtype=torch.long,
            )
            earlier = sorted(row.slots, key=row.slots.__getitem__)  # nodes cached this step
            key_positions = torch.cat(
                [
                    torch.arange(row.cached),
                    torch.as_tensor(
                        [base + self.depths[n] - 1 for n in earlier if n < first], dtype=torch.long
                    ),
                    positions,
                ]
            )
            want = list(range(len(pending) - 1 if pending else 0, n_q))
            laws = (
                self.model.laws(
                    self.model.logits(ids, positions, mask, row.cache, want, key_positions)
                )
                if n_q
                else np.empty((0, self.model.vocab_size))
            )
            if pending:
                row.root, laws = laws[0], laws[1:]
                row.cached = committed
            assert row.root is not None
            out[r, 0] = row.root
            out[r, 1:] = laws
        return out

    def commit(
        self, rows: IntArray, tokens: Sequence[Sequence[int]], nodes: Sequence[Sequence[int]]
    ) -> None:
        for r, index in enumerate(rows):
            row = self.rows[index]
            keep = [*range(row.cached), *(row.slots[n] for n in nodes[r])]
            row.cache.keep(keep)
            row.cached = len(keep)
            row.tokens.extend(int(t) for t in tokens[r])
            row.slots, row.root = {}, None
        self.parents, self.depths = [], []

    def context(self, row: int) -> list[int]:
        return list(self.rows[row].tokens)

    def cache_bytes(self) -> int:
        """Bytes held by the KV caches of all rows."""
        return sum(row.cache.nbytes() for row in self.rows)
