"""Autoregressive models: a next-token distribution for any prefix ([GBV] §2.1).

A model maps a prefix (a tuple of token ids) to a probability vector over the vocabulary;
any callable with that signature works everywhere in :mod:`otlp.multistep`. The classes here
are small exact models for tests and tables:

* :class:`NGramModel` — the next token depends on the last ``context`` tokens (padded with a
  begin-of-sequence symbol); ``context=0`` is a context-free model, ``context=1`` a Markov
  chain (:func:`markov_model`).
* :class:`TabularModel` — a separate next-token law at every prefix up to a fixed depth: the
  random tree-structured models, where no two contexts share anything.

:func:`model_pair` draws a (target, draft) pair of one kind; the draft is the target mixed
with independent noise, so ``distance`` tunes how well the draft matches.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otlp.args import as_generator, positive_int, real_number
from otlp.errors import ProblemTooLarge
from otlp.limits import current as current_limits
from otlp.solvers.arrays import FloatArray, IntArray

Model = Callable[[tuple[int, ...]], ArrayLike]


class AutoregressiveModel:
    """Base class: ``model(prefix)`` is the next-token law after ``prefix``.

    Subclasses implement :meth:`batch`, the laws after many equal-length prefixes at once.
    """

    vocab_size: int

    def batch(self, prefixes: IntArray) -> FloatArray:
        """Next-token laws after each row of ``prefixes`` (shape ``(m, d)``) -> ``(m, V)``."""
        raise NotImplementedError

    def __call__(self, prefix: Sequence[int]) -> FloatArray:
        return self.batch(np.asarray(prefix, dtype=np.int64).reshape(1, -1))[0]


class NGramModel(AutoregressiveModel):
    """Next-token law indexed by the last ``context`` tokens.

    ``table`` has shape ``(V + 1,) * context + (V,)``; index ``V`` is the begin-of-sequence
    symbol that pads prefixes shorter than ``context``.
    """

    def __init__(self, table: ArrayLike) -> None:
        arr = _float_array("table", table)
        if arr.ndim < 1 or arr.shape[-1] == 0:
            raise ValueError("table: expected at least one non-empty axis (the next token)")
        vocab = arr.shape[-1]
        if any(size != vocab + 1 for size in arr.shape[:-1]):
            raise ValueError(f"table: context axes must have size V + 1 = {vocab + 1}")
        _check_rows("table", arr.reshape(-1, vocab))
        arr.setflags(write=False)
        self.table = arr
        self.vocab_size = vocab
        self.context = arr.ndim - 1

    def batch(self, prefixes: IntArray) -> FloatArray:
        prefixes = np.asarray(prefixes, dtype=np.int64)
        rows, length = prefixes.shape
        if self.context == 0:
            return np.broadcast_to(self.table, (rows, self.vocab_size)).copy()
        pad = np.full((rows, max(self.context - length, 0)), self.vocab_size, dtype=np.int64)
        ctx = np.hstack([pad, prefixes])[:, prefixes.shape[1] + pad.shape[1] - self.context :]
        return self.table[tuple(ctx.T)]

    def __repr__(self) -> str:
        return f"NGramModel(V={self.vocab_size}, context={self.context})"


def markov_model(initial: ArrayLike, transition: ArrayLike) -> NGramModel:
    """A first-order Markov chain: ``initial`` law of the first token, ``transition[a, b]``."""
    init = _float_array("initial", initial)
    trans = _float_array("transition", transition)
    if init.ndim != 1 or init.size == 0:
        raise ValueError(f"initial: expected a non-empty 1-D law, got shape {init.shape}")
    if trans.shape != (init.shape[0], init.shape[0]):
        raise ValueError(f"transition: expected shape {(init.shape[0],) * 2}, got {trans.shape}")
    _check_rows("initial", init[None, :])
    _check_rows("transition", trans)
    return NGramModel(np.vstack([trans, init]))


def _float_array(name: str, values: ArrayLike) -> NDArray[np.float64]:
    """``values`` as a float64 array, or a ``ValueError`` naming ``name``."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: expected an array of probabilities ({exc})") from None


class TabularModel(AutoregressiveModel):
    """A separate next-token law for every prefix of length < ``depth`` (a tree model).

    ``conditionals[d]`` has shape ``(V**d, V)``; row ``i`` is the law after the prefix whose
    base-V digits (most significant first) are ``i``.
    """

    def __init__(self, conditionals: Sequence[ArrayLike]) -> None:
        try:
            conditionals = list(conditionals)
        except TypeError:
            raise ValueError(
                f"conditionals: expected a sequence of arrays, got {conditionals!r}"
            ) from None
        if len(conditionals) == 0:
            raise ValueError("conditionals: need at least the law of the first token")
        tables = [_float_array(f"conditionals[{d}]", c) for d, c in enumerate(conditionals)]
        vocab = tables[0].shape[-1]
        for d, table in enumerate(tables):
            if table.shape != (vocab**d, vocab):
                raise ValueError(
                    f"conditionals[{d}]: expected shape {(vocab**d, vocab)}, got {table.shape}"
                )
            _check_rows(f"conditionals[{d}]", table)
            table.setflags(write=False)
        self.conditionals = tuple(tables)
        self.vocab_size = vocab
        self.depth = len(tables)

    def batch(self, prefixes: IntArray) -> FloatArray:
        prefixes = np.asarray(prefixes, dtype=np.int64)
        length = prefixes.shape[1]
        if length >= self.depth:
            raise ValueError(f"prefix: length {length} is beyond the model depth {self.depth}")
        return self.conditionals[length][prefix_index(prefixes, self.vocab_size)]

    def __repr__(self) -> str:
        return f"TabularModel(V={self.vocab_size}, depth={self.depth})"


def prefix_index(prefixes: IntArray, vocab: int) -> IntArray:
    """Lexicographic base-V index of each row of ``prefixes``."""
    prefixes = np.asarray(prefixes, dtype=np.int64)
    weights = vocab ** np.arange(prefixes.shape[1] - 1, -1, -1, dtype=np.int64)
    return prefixes @ weights


def prefix_digits(index: IntArray, vocab: int, length: int) -> IntArray:
    """Inverse of :func:`prefix_index`: the ``length`` tokens of each index, ``(m, length)``."""
    powers = vocab ** np.arange(length - 1, -1, -1, dtype=np.int64)
    return (np.asarray(index, dtype=np.int64)[:, None] // powers) % vocab


def _check_rows(name: str, rows: FloatArray) -> None:
    if not np.all(np.isfinite(rows)) or np.any(rows < 0):
        raise ValueError(f"{name}: entries must be finite and nonnegative")
    if rows.size and np.max(np.abs(rows.sum(axis=-1) - 1.0)) > 1e-9:
        raise ValueError(f"{name}: every next-token law must sum to 1")


# ----- random model pairs -----------------------------------------------------------------
MODEL_KINDS = ("context-free", "markov", "ngram", "tree")


def model_pair(
    kind: str,
    vocab: int,
    *,
    seed: int = 0,
    distance: float = 0.5,
    concentration: float = 1.0,
    depth: int = 5,
    context: int = 2,
    sparsity: float = 0.0,
) -> tuple[AutoregressiveModel, AutoregressiveModel]:
    """A random (target, draft) pair of ``kind`` in :data:`MODEL_KINDS`.

    Every next-token law of the target is Dirichlet(``concentration``); the draft's is
    ``(1 - distance) * target + distance * noise`` with independent Dirichlet noise. With
    ``sparsity`` > 0 each entry of both is zeroed with that probability (then renormalised;
    one entry per law is always kept), which makes tokens the draft cannot produce.
    ``depth`` is the tree depth (``kind="tree"``) and ``context`` the n-gram context length.
    """
    vocab = positive_int("vocab", vocab)
    distance = real_number("distance", distance, minimum=0.0, maximum=1.0)
    concentration = real_number("concentration", concentration, minimum=0.0, exclusive_minimum=True)
    sparsity = real_number("sparsity", sparsity, minimum=0.0)
    if sparsity >= 1.0:
        raise ValueError(f"sparsity: must lie in [0, 1), got {sparsity}")
    rng = as_generator(positive_int("seed", seed, minimum=0), "seed")
    if kind == "tree":
        depth = positive_int("depth", depth)
        check_toy_size(kind, vocab, depth=depth)
        shapes = [(vocab**d, vocab) for d in range(depth)]
        pairs = [_law_pair(shape, rng, distance, concentration, sparsity) for shape in shapes]
        return TabularModel([t for t, _ in pairs]), TabularModel([d for _, d in pairs])
    contexts = {"context-free": 0, "markov": 1, "ngram": context}
    if kind not in contexts:
        raise ValueError(f"kind: expected one of {MODEL_KINDS}, got {kind!r}")
    ctx = positive_int("context", contexts[kind], minimum=0)
    check_toy_size(kind, vocab, context=ctx)
    shape = (vocab + 1,) * ctx + (vocab,)
    target, draft = _law_pair(shape, rng, distance, concentration, sparsity)
    return NGramModel(target), NGramModel(draft)


LAW_TABLES = 3  # arrays of a law table's size that _law_pair holds at once (target, noise, draft)


def check_toy_size(kind: str, vocab: int, *, context: int = 1, depth: int = 5) -> None:
    """Refuse (:class:`~otlp.errors.ProblemTooLarge`, before any allocation) a
    :func:`model_pair` whose law tables are over ``otlp.limits``: (V + 1)^context x V
    entries for the n-gram kinds (``context`` 0 context-free, 1 markov), V + V^2 + ... + V^depth
    for ``tree``, each held :data:`LAW_TABLES` times while the pair is drawn."""
    if kind == "tree":
        entries = sum(vocab**d * vocab for d in range(depth))
    else:
        entries = (vocab + 1) ** context * vocab
    entries *= LAW_TABLES
    limit = current_limits().max_variables
    if entries > limit:  # float64 entries: 8 bytes each
        raise ProblemTooLarge(
            f"{kind} model pair's law tables", entries, 8 * entries, limit, advice="lower vocab"
        )


def _law_pair(
    shape: tuple[int, ...],
    rng: np.random.Generator,
    distance: float,
    concentration: float,
    sparsity: float,
) -> tuple[FloatArray, FloatArray]:
    vocab = shape[-1]
    alpha = np.full(vocab, concentration)
    rows = int(np.prod(shape[:-1]))
    target = _sparsify(rng.dirichlet(alpha, size=rows), rng, sparsity)
    noise = rng.dirichlet(alpha, size=rows)
    draft = _sparsify((1.0 - distance) * target + distance * noise, rng, sparsity)
    return target.reshape(shape), draft.reshape(shape)


def _sparsify(rows: FloatArray, rng: np.random.Generator, sparsity: float) -> FloatArray:
    if sparsity == 0.0:
        return rows
    keep = rng.random(rows.shape) >= sparsity
    keep[np.arange(rows.shape[0]), rows.argmax(axis=1)] = True
    rows = np.where(keep, rows, 0.0)
    return rows / rows.sum(axis=1, keepdims=True)
