"""Prompt lookup: a draft that costs no forward pass, on one path or several.

At a context ending in the n-gram g (n from ``ngram`` down to 1), the draft proposes the token
that followed an earlier occurrence of g in the context (prompt and generated text)
(prompt-lookup decoding; the retrieval drafts [GBV] §1 cites). It pays off when the output
copies its input (extraction, corrections, edits), and at low temperature.

**The draft law q.** A verification rule is lossless only if the drafted children are
distributed as its scheme says given the q it is handed (i.i.d. from q, without replacement
from q, ...): a rule handed a q that is not the law the children were drawn from is biased.
Lookup drafts are deterministic functions of the context, so the law must make them so:

* ``width=1`` (one path): q is one-hot on the token after the most recent occurrence of the
  longest recurring suffix; drawing from it is deterministic, so the draft is the lookup
  token and q is its exact law.
* ``width=W`` (several paths, :func:`candidates`): the W most relevant distinct
  continuations (longest recurring suffix first, then shorter ones; most recent first) share
  the mass ``1 - floor`` equally, and ``floor`` is spread uniformly over the vocabulary. The
  decode loop *draws* the children from this q by the method's scheme, so every rule stays
  lossless; drawn without replacement (``rrs_without_replacement``, K = W) the children are
  exactly the W candidates in a random order, the multi-path lookup tree. The floor keeps
  the support at least K wherever fewer than K candidates exist (a draw without replacement
  needs K tokens of positive mass); i.i.d. schemes draw a floor token with probability
  ``floor``.

Where no n-gram recurs, q is uniform over the vocabulary: a valid draft that is almost never
accepted. A :class:`PromptLookup` is a function of prefixes: use it as
``PrefixLM(PromptLookup(V))``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from otlp.args import positive_int
from otlp.solvers.arrays import FloatArray, IntArray

# The floor of the multi-path law: small enough that an i.i.d. child is a floor token once in
# a million draws, positive so that K children without replacement always exist.
MULTI_PATH_FLOOR = 1e-6


class PromptLookup:
    """Next-token laws of the prompt-lookup draft over ``vocab_size`` tokens (see the module
    docstring): ``width`` candidate continuations, ``floor`` mass spread over the vocabulary
    (default: 0 for one path, :data:`MULTI_PATH_FLOOR` for several)."""

    def __init__(
        self, vocab_size: int, *, ngram: int = 3, width: int = 1, floor: float | None = None
    ) -> None:
        self.vocab_size = positive_int("vocab_size", vocab_size)
        self.ngram = positive_int("ngram", ngram)
        self.width = positive_int("width", width)
        if floor is None:
            floor = 0.0 if width == 1 else MULTI_PATH_FLOOR
        if not 0.0 <= floor < 1.0:
            raise ValueError(f"floor: expected 0 <= floor < 1, got {floor!r}")
        self.floor = float(floor)

    def batch(self, prefixes: IntArray) -> FloatArray:
        """Laws after each row of ``prefixes`` ``(m, d)``, ``(m, V)``."""
        prefixes = np.asarray(prefixes, dtype=np.int64)
        out = np.zeros((prefixes.shape[0], self.vocab_size))
        for i, prefix in enumerate(prefixes):
            found = [
                t for t in candidates(prefix, self.ngram, self.width) if 0 <= t < self.vocab_size
            ]
            if not found:
                out[i] = 1.0 / self.vocab_size
                continue
            out[i] = self.floor / self.vocab_size
            out[i, found] += (1.0 - self.floor) / len(found)
        return out

    def __repr__(self) -> str:
        extra = f", width={self.width}, floor={self.floor:g}" if self.width > 1 else ""
        return f"PromptLookup(V={self.vocab_size}, ngram={self.ngram}{extra})"


def lookup_spec(name: str) -> tuple[int, int] | None:
    """(ngram, width) of a lookup draft name — ``lookup`` (3, 1), ``lookupN`` (N, 1),
    ``lookupNwW`` or ``lookupwW`` (W paths) — or None for any other name."""
    match = re.fullmatch(r"lookup(\d*)(?:w(\d+))?", name)
    if match is None:
        return None
    ngram, width = int(match.group(1) or 3), int(match.group(2) or 1)
    if ngram < 1 or width < 1:
        raise ValueError(f"draft: {name!r} needs N >= 1 and W >= 1")
    return ngram, width


def candidates(context: Sequence[int] | IntArray, ngram: int, width: int) -> list[int]:
    """Up to ``width`` distinct tokens that followed earlier occurrences of the suffixes of
    ``context``: suffix length ``ngram`` down to 1, and for each length the most recent
    occurrence first."""
    seq = np.asarray(context, dtype=np.int64)
    found: list[int] = []
    for n in range(min(ngram, seq.size - 1), 0, -1):
        windows = sliding_window_view(seq[:-1], n)  # start i: seq[i:i+n], followed by seq[i+n]
        starts = np.flatnonzero((windows == seq[-n:]).all(axis=1))
        for start in starts[::-1]:
            token = int(seq[start + n])
            if token not in found:
                found.append(token)
                if len(found) == width:
                    return found
    return found


def lookup(context: Sequence[int], ngram: int) -> int | None:
    """The token after the most recent earlier occurrence of the longest recurring suffix of
    ``context`` (length ``ngram`` down to 1), or None."""
    found = candidates(context, ngram, 1)
    return found[0] if found else None
