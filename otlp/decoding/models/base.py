"""What the decoding engine asks of a language model: next-token laws over a draft tree.

A :class:`TreeModel` opens a :class:`TreeSession` on a batch of B prompts. A session holds the
committed context of every row (and whatever cache the model keeps for it) and answers one
question per call: the next-token laws at the root (the committed context) and at new draft
nodes that hang below the root or below nodes given earlier in the same step. The tree follows
the engine's convention ([SpecHub] §3, SpecTr's token trees): ``parents[i] < i``, ``-1`` = a
child of the root, node i's context = the committed context + the tokens on the path to i.

* the target calls :meth:`TreeSession.forward` once per step with the whole tree (one batched
  forward: a tree attention mask over the cached context);
* the draft calls it depth by depth with the frontier nodes;
* :meth:`TreeSession.commit` appends each row's accepted tokens and the bonus token; a model
  with a KV cache keeps the entries of the accepted nodes and drops the rest, so a session's
  memory follows the committed length only.

Laws are float64 numpy arrays ``(B, 1 + m, V)``: index 0 is the root law, index 1 + j the law
after new node j. ``temperature`` is applied by the model (``softmax(logits / T)``, or
``p ** (1 / T)`` renormalised for models given as probabilities); ``T = 0`` is greedy: the
law is one-hot at the most likely token (lowest index on ties).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from otlp.args import real_number
from otlp.solvers.arrays import FloatArray, IntArray


class TreeSession(Protocol):
    """Committed contexts of B rows and the laws at draft nodes below them."""

    def forward(self, tokens: IntArray, parents: IntArray, rows: IntArray) -> FloatArray:
        """Laws at the root and at m new nodes for the given ``rows``.

        ``tokens``: ``(len(rows), m)`` drafted ids (``-1`` = absent in that row, its law is
        unspecified); ``parents``: ``(m,)`` indices into this step's nodes (earlier calls of
        the step count first) or ``-1`` for the root. Returns ``(len(rows), 1 + m, V)``.
        """
        ...

    def commit(
        self, rows: IntArray, tokens: Sequence[Sequence[int]], nodes: Sequence[Sequence[int]]
    ) -> None:
        """End the step: row ``rows[r]`` appends ``tokens[r]`` (its accepted drafts and the bonus
        token); ``nodes[r]`` are this step's ids of the accepted nodes the session was given, a
        root-down prefix of the accepted path (a cache keeps their entries, drops the rest)."""
        ...

    def context(self, row: int) -> list[int]:
        """The committed token ids of ``row`` (prompt included)."""
        ...


class TreeModel(Protocol):
    """A language model the engine can decode with: ``session(prompts)`` for B prompts."""

    vocab_size: int
    name: str

    def session(self, prompts: Sequence[Sequence[int]]) -> TreeSession: ...


def check_temperature(temperature: float) -> float:
    """``temperature`` as a float >= 0 (0 = greedy), or ``ValueError`` naming it."""
    return real_number("temperature", temperature, minimum=0.0)


def greedy(scores: FloatArray) -> FloatArray:
    """One-hot laws at the argmax of the last axis (the lowest index on ties)."""
    out = np.zeros(scores.shape, dtype=np.float64)
    np.put_along_axis(out, np.argmax(scores, axis=-1)[..., None], 1.0, axis=-1)
    return out


def tempered(probs: FloatArray, temperature: float) -> FloatArray:
    """Laws ``p ** (1 / T)`` renormalised over the last axis; ``T = 0`` is :func:`greedy`."""
    probs = np.asarray(probs, dtype=np.float64)
    if temperature == 0.0:
        return greedy(probs)
    if temperature == 1.0:
        return probs
    with np.errstate(divide="ignore"):
        logits = np.log(probs) / temperature
    logits -= logits.max(axis=-1, keepdims=True)
    out = np.exp(logits)
    return out / out.sum(axis=-1, keepdims=True)


def check_model(name: str, model: object) -> int:
    """``model``'s vocabulary size if it is a :class:`TreeModel`, else a ``ValueError``."""
    vocab = getattr(model, "vocab_size", None)
    if not callable(getattr(model, "session", None)) or not isinstance(vocab, numbers.Integral):
        raise ValueError(
            f"{name}: expected a TreeModel (vocab_size and session(prompts)), "
            f"got {type(model).__name__}"
        )
    return int(vocab)
