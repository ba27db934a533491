"""Problem instances: a target p, a draft scheme (q, n) and an optional top-k restriction.

Top-k follows seed 000, Appendix N: each draft distribution is restricted to its k most likely
tokens and renormalised; the target p is sliced to those tokens, not renormalised. The target
mass outside the draft vocabulary stays in the problem through the residual of Eq. (3), so
plans still cover the whole vocabulary while all work scales with k, not with V.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otlp.columns import DraftColumns, build_columns
from otlp.validation import DEFAULT_SUM_TOL, positive_int, probability_vector

SCHEMES = ("iid", "independent", "without_replacement")
FloatArray = NDArray[np.float64]


class Instance:
    """One multi-draft verification problem.

    Parameters
    ----------
    p:
        Target distribution over the vocabulary (length V).
    q:
        Draft distribution (length V); for ``scheme="independent"`` a sequence of n of them.
    n:
        Number of drafts.
    scheme:
        ``"iid"`` (n i.i.d. draws from q), ``"independent"`` (draw d from ``q[d]``) or
        ``"without_replacement"`` (n distinct tokens drawn sequentially from q).
    top_k:
        Restrict each draft distribution to its top-k tokens (renormalised); None keeps all
        tokens with positive draft probability.
    renormalize:
        Rescale p and q to sum to 1 instead of rejecting sums off by more than ``atol``.
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
        if scheme not in SCHEMES:
            raise ValueError(f"scheme: expected one of {SCHEMES}, got {scheme!r}")
        self.scheme = scheme
        self.n = positive_int("n", n)
        p_arr = probability_vector("p", p, renormalize=renormalize, atol=atol)
        vocab = p_arr.shape[0]
        if scheme == "independent":
            q_list = list(q) if not isinstance(q, np.ndarray) or np.ndim(q) == 2 else None
            if q_list is None or len(q_list) != self.n:
                got = "a single vector" if q_list is None else f"{len(q_list)} vectors"
                raise ValueError(f"q: scheme 'independent' needs n={self.n} vectors, got {got}")
            rows = [
                probability_vector(f"q[{d}]", qd, renormalize=renormalize, atol=atol)
                for d, qd in enumerate(q_list)
            ]
        else:
            rows = [probability_vector("q", q, renormalize=renormalize, atol=atol)]
        for d, row in enumerate(rows):
            if row.shape[0] != vocab:
                name = "q" if len(rows) == 1 else f"q[{d}]"
                raise ValueError(f"{name}: length {row.shape[0]} differs from len(p) = {vocab}")
        self.top_k = None if top_k is None else positive_int("top_k", top_k, maximum=vocab)
        # Exact unit sums keep the transport problem balanced.
        self.p = _exact_unit(p_arr)
        self.q = (
            _exact_unit(rows[0]) if len(rows) == 1 else np.vstack([_exact_unit(r) for r in rows])
        )
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
            values = np.where(np.isin(tokens, kept), row[tokens], 0.0)
            restricted[d] = values / values.sum()
        if self.scheme == "without_replacement" and tokens.shape[0] < self.n:
            raise ValueError(
                f"n: sampling {self.n} tokens without replacement needs at least {self.n} "
                f"draft tokens, but only {tokens.shape[0]} have positive draft probability"
            )
        self.tokens: NDArray[np.int64] = tokens.astype(np.int64)
        self.tokens.setflags(write=False)
        self.k = int(tokens.shape[0])
        self.p_local: FloatArray = self.p[tokens]
        # Summed over the outside tokens themselves: exactly 0 when nothing is outside.
        self.p_outside = float(np.delete(self.p, tokens).sum())
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

    def to_local(self, omega: ArrayLike) -> NDArray[np.int64]:
        """Map drafted global token ids to draft-vocabulary positions; reject impossible drafts."""
        arr = np.atleast_1d(np.asarray(omega))
        if arr.shape[-1] != self.n or not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"omega: expected {self.n} integer token ids, got {arr.tolist()!r}")
        pos = np.clip(np.searchsorted(self._sorted_tokens, arr), 0, self.k - 1)
        if not np.all(self._sorted_tokens[pos] == arr):
            raise ValueError("omega: contains a token the draft cannot produce")
        return self._search_order[pos]

    def sample_drafts(self, rng: np.random.Generator, size: int) -> NDArray[np.int64]:
        """Draw ``size`` n-tuples from the draft scheme; returns global token ids, ``(size, n)``."""
        rows = np.asarray(self.draft_rows)
        if self.scheme == "without_replacement":
            # Gumbel-top-n gives n draws without replacement in draw order.
            with np.errstate(divide="ignore"):
                keys = np.log(rows[0]) + rng.gumbel(size=(size, self.k))
            local = np.argsort(-keys, axis=1)[:, : self.n]
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


def _exact_unit(arr: FloatArray) -> FloatArray:
    out = arr / arr.sum()
    out.setflags(write=False)
    return out


def _top_tokens(row: FloatArray, top_k: int | None) -> NDArray[np.int64]:
    """Positive-probability tokens of ``row``, the top_k largest (ties by token id).

    O(V): a selection finds the k-th largest value, then only the k survivors are sorted
    (by decreasing probability, ties by increasing token id).
    """
    if top_k is None or top_k >= row.shape[0]:
        chosen = np.flatnonzero(row > 0)
    else:
        kth = float(np.partition(row, row.shape[0] - top_k)[row.shape[0] - top_k])
        if kth > 0:
            above = np.flatnonzero(row > kth)
            ties = np.flatnonzero(row == kth)[: top_k - above.shape[0]]
            chosen = np.concatenate([above, ties])
        else:  # fewer than top_k positive tokens
            chosen = np.flatnonzero(row > 0)
    return chosen[np.lexsort((chosen, -row[chosen]))]
