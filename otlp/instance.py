"""Problem instances: a target p, a draft scheme (q, n) and an optional top-k restriction.

Top-k follows [GR] Appendix N: each draft distribution is restricted to its k most likely
tokens and renormalised; the target p is sliced to those tokens, not renormalised. The target
mass outside the draft vocabulary stays in the problem through the residual of Eq. (3), so
plans still cover the whole vocabulary while all work scales with k, not with V.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otlp import greedy
from otlp.args import (
    DEFAULT_SUM_TOL,
    as_generator,
    canonical_name,
    positive_int,
    probability_vector,
)
from otlp.columns import DraftColumns, build_columns
from otlp.limits import check_drafts, check_size
from otlp.solvers.arrays import FloatArray
from otlp.solvers.global_resolution.sorting import top_tokens

SCHEMES = ("iid", "independent", "without_replacement", "greedy")


class Instance:
    """One multi-draft verification problem.

    Parameters
    ----------
    p : array_like
        Target distribution over the vocabulary (length V).
    q : array_like or sequence of array_like
        Draft distribution (length V); for ``scheme="independent"`` a sequence of n of them.
    n : int
        Number of drafts.
    scheme : {"iid", "independent", "without_replacement"}, default "iid"
        ``"iid"`` (n i.i.d. draws from q), ``"independent"`` (draw d from ``q[d]``) or
        ``"without_replacement"`` (n distinct tokens drawn sequentially from q) or ``"greedy"``
        (the top n-1 tokens of q, then one drawn from the rest; [GR] Appendix O).
    top_k : int, optional
        Restrict each draft distribution to its top-k tokens (renormalised) and slice p
        there without renormalising it ([GR] Appendix N); None keeps all tokens with
        positive draft probability.
    renormalize : bool, default False
        Rescale p and q to sum to 1 instead of rejecting sums off by more than ``atol``.
    atol : float
        Tolerance on the sums of p and q.

    Raises
    ------
    ValueError
        Naming the argument: NaN/inf or negative entries, sums off by more than ``atol``,
        length mismatch, n < 1, top_k outside [1, V], unknown scheme.

    Examples
    --------
    >>> import otlp
    >>> inst = otlp.Instance([0.5, 0.3, 0.2], [0.2, 0.3, 0.5], n=2, top_k=2)
    >>> inst
    Instance(V=3, n=2, scheme='iid', top_k=2, k=2)
    >>> inst.tokens.tolist(), inst.p_outside  # the draft vocabulary; target mass outside it
    ([2, 1], 0.5)
    """

    def __init__(
        self,
        p: ArrayLike,
        q: ArrayLike | Sequence[ArrayLike],
        n: int,
        scheme: str = "iid",
        top_k: int | None = None,
        *,
        renormalize: bool = False,
        atol: float = DEFAULT_SUM_TOL,
    ) -> None:
        if not isinstance(scheme, str) or canonical_name(scheme) not in SCHEMES:
            raise ValueError(f"scheme: expected one of {SCHEMES}, got {scheme!r}")
        self.scheme = scheme = canonical_name(scheme)
        self.n = positive_int("n", n)
        check_drafts(self.n)  # before one draft row per draw is allocated
        p_arr = probability_vector("p", p, renormalize=renormalize, atol=atol)
        vocab = p_arr.shape[0]
        if scheme == "independent":
            q_list = (
                list(cast(Sequence[ArrayLike], q))
                if not isinstance(q, np.ndarray) or np.ndim(q) == 2
                else None
            )
            if q_list is None or len(q_list) != self.n:
                got = "a single vector" if q_list is None else f"{len(q_list)} vectors"
                raise ValueError(f"q: scheme 'independent' needs n={self.n} vectors, got {got}")
            named: list[tuple[str, Any]] = [(f"q[{d}]", qd) for d, qd in enumerate(q_list)]
        else:
            named = [("q", cast(ArrayLike, q))]
        for name, values in named:  # a length error is reported as such, before any sum
            length = _vector_length(values)
            if length is not None and length != vocab:
                raise ValueError(f"{name}: length {length} differs from len(p) = {vocab}")
        rows = [
            probability_vector(name, values, renormalize=renormalize, atol=atol)
            for name, values in named
        ]
        self.top_k = None if top_k is None else positive_int("top_k", top_k, maximum=vocab)
        self.p = p_arr  # divided by its sum: the transport problem stays balanced
        self.q = rows[0] if len(rows) == 1 else np.vstack(rows)
        self.q.setflags(write=False)
        self.vocab_size = vocab
        self._restrict(rows)

    def _restrict(self, rows: list[FloatArray]) -> None:
        keep = [_top_tokens(row, self.top_k) for row in rows]
        if len(rows) == 1:
            tokens = keep[0]  # decreasing draft probability
        else:
            tokens = np.unique(np.concatenate(keep))
        restricted = np.zeros((len(rows), tokens.shape[0]))
        for d, (row, kept) in enumerate(zip(rows, keep, strict=True)):
            values = (
                row[tokens] if len(rows) == 1 else np.where(np.isin(tokens, kept), row[tokens], 0.0)
            )
            restricted[d] = values / values.sum()
        if self.scheme in ("without_replacement", "greedy") and tokens.shape[0] < self.n:
            raise ValueError(
                f"n: sampling {self.n} tokens without replacement needs at least {self.n} "
                f"draft tokens, but only {tokens.shape[0]} have positive draft probability"
            )
        self.tokens: NDArray[np.int64] = tokens.astype(np.int64)
        self.tokens.setflags(write=False)
        self.k = int(tokens.shape[0])
        self.p_local: FloatArray = self.p[tokens]
        # Summed over the outside tokens themselves: exactly 0 when nothing is outside.
        outside = np.ones(self.p.shape[0], dtype=bool)
        outside[tokens] = False
        self.p_outside = float(np.add.reduce(self.p, where=outside))
        # The target over the draft vocabulary plus one aggregated outside row: the row side
        # of every problem, plan and rule (length k + 1).
        self.target_rows: FloatArray = np.append(self.p_local, self.p_outside)
        self.target_rows.setflags(write=False)
        # Sorted token ids and their draft-vocabulary positions, for to_local.
        self._search_order = np.argsort(self.tokens).astype(np.int64)
        self._sorted_tokens = self.tokens[self._search_order]
        self._columns: dict[str, DraftColumns] = {}
        # One row per draw: i.i.d. and without-replacement schemes repeat their single row.
        self.draft_rows: FloatArray = (
            restricted if len(rows) > 1 else np.repeat(restricted, self.n, axis=0)
        )
        self.draft_rows.setflags(write=False)

    # ----- derived views -------------------------------------------------------------------
    @property
    def q_local(self) -> FloatArray:
        """The restricted, renormalised draft over the draft vocabulary (first draw's row)."""
        return self.draft_rows[0]

    @property
    def exchangeable(self) -> bool:
        """Whether the draft joint is invariant under permuting the n draws."""
        return self.scheme in ("iid", "without_replacement")

    def columns(self, form: str = "sets") -> DraftColumns:
        """The draft columns in ``form`` ("sets" or "tuples"), built once and cached."""
        if form not in self._columns:
            self._columns[form] = build_columns(form, self.draft_rows, self.n, self.scheme)
        return self._columns[form]

    def global_law(self, local: FloatArray) -> FloatArray:
        """A law over the draft vocabulary plus the outside row (length k + 1) as a dense
        vector over all V tokens: the outside row spread over the outside tokens in
        proportion to p (one pass over p)."""
        if self.p_outside > 0:
            out = self.p * (local[self.k] / self.p_outside)
        else:
            out = np.zeros(self.vocab_size)
        out[self.tokens] = local[: self.k]
        return out

    def to_local(self, omega: ArrayLike) -> NDArray[np.int64]:
        """Map drafted global token ids to draft-vocabulary positions; reject impossible drafts."""
        arr = np.atleast_1d(np.asarray(omega))
        if arr.ndim != 1 or arr.shape[0] != self.n or not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(
                f"omega: expected a 1-D sequence of {self.n} integer token ids, got "
                f"{arr.tolist()!r} (shape {arr.shape})"
            )
        pos = np.clip(np.searchsorted(self._sorted_tokens, arr), 0, self.k - 1)
        local = np.where(self._sorted_tokens[pos] == arr, self._search_order[pos], -1)
        d = impossible_draw(self.draft_rows, local)
        if d >= 0:
            raise ValueError(f"omega[{d}]: token {int(arr[d])} {IMPOSSIBLE_DRAW}")
        return local

    def sample_drafts(self, rng: object, size: int) -> NDArray[np.int64]:
        """Draw ``size`` n-tuples from the draft scheme; returns global token ids, ``(size, n)``.

        ``rng`` is an int seed, None (fresh entropy) or a ``numpy.random.Generator``.
        """
        rng = as_generator(rng)
        size = positive_int("size", size)
        width = self.k if self.scheme == "without_replacement" else self.n
        check_size(f"{size:,} draft samples", size * width)
        rows = np.asarray(self.draft_rows)
        if self.scheme == "without_replacement":
            # Gumbel-top-n gives n draws without replacement in draw order.
            with np.errstate(divide="ignore"):
                keys = np.log(rows[0]) + rng.gumbel(size=(size, self.k))
            local = np.argsort(-keys, axis=1)[:, : self.n]
        elif self.scheme == "greedy":
            local = greedy.sample_local(rows[0], self.n, rng, size)
        else:
            local = np.empty((size, self.n), dtype=np.int64)
            for d in range(self.n):
                local[:, d] = rng.choice(self.k, size=size, p=rows[d])
        return self.tokens[local]

    def describe(self) -> dict[str, Any]:
        """A small JSON-friendly summary."""
        return {
            "V": self.vocab_size,
            "k": self.k,
            "n": self.n,
            "scheme": self.scheme,
            "top_k": self.top_k,
            "p_outside": self.p_outside,
        }

    def __repr__(self) -> str:
        return (
            f"Instance(V={self.vocab_size}, n={self.n}, scheme={self.scheme!r}, "
            f"top_k={self.top_k}, k={self.k})"
        )


IMPOSSIBLE_DRAW = "cannot be drafted (draft probability 0, or outside the top-k draft)"


def impossible_draw(draft_rows: FloatArray, local: NDArray[np.int64]) -> int:
    """The first draft position whose token its draw cannot produce, else -1: the one rule
    for which drafted tuples are possible, shared by every method.

    ``local`` holds the drafts' draft-vocabulary positions (-1: outside the vocabulary);
    ``draft_rows`` is one restricted row per draw, or a single row shared by every draw.
    Drafts are ordered: draw d comes from row d ([GR] Appendix C: p_draft(i_1, ..., i_n) =
    q_1(i_1) ... q_n(i_n)), so for two independent drafters the first token must have
    positive probability under the first drafter's top-k draft and the second under the
    second's (the union vocabulary is not enough). The optimal slice still depends on the
    set of drafted tokens only ([GR] Eq. 2), so both orders of a possible pair get one law.
    """
    last = draft_rows.shape[0] - 1
    for d, position in enumerate(local.tolist()):  # n is small: no array temporaries
        if position < 0 or not draft_rows[min(d, last), position] > 0:
            return d
    return -1


def require_instance(value: object, name: str = "inst") -> Instance:
    """``value`` if it is an :class:`Instance`, else ``ValueError`` naming the argument."""
    if not isinstance(value, Instance):
        raise ValueError(f"{name}: expected an otlp.Instance, got {type(value).__name__}")
    return value


def _vector_length(values: ArrayLike) -> int | None:
    """len(values) if it is a 1-D array-like, else None (probability_vector reports why)."""
    try:
        shape = np.shape(values)
    except ValueError:  # ragged nesting
        return None
    return shape[0] if len(shape) == 1 else None


def _top_tokens(row: FloatArray, top_k: int | None) -> NDArray[np.int64]:
    """Positive-probability tokens of ``row``, the top_k largest (ties by token id).

    The project's one top-k selection, :func:`otlp.solvers.global_resolution.sorting.top_tokens`
    (O(V): a bounded heap or a histogram selection, then a sort of the k survivors), which
    the fused decoder path calls on the same rows.
    """
    return top_tokens(np.ascontiguousarray(row, dtype=np.float64), top_k or 0)
