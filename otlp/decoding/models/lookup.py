"""Prompt lookup: a draft that costs no forward pass.

At a context ending in the n-gram g (n from ``ngram`` down to 1), the draft proposes the token
that followed the most recent earlier occurrence of g in the context (prompt and generated
text), with probability 1 (prompt-lookup decoding; the retrieval drafts [GBV] §1 cites). Where
no n-gram recurs, the law is uniform over the vocabulary: a valid draft that is almost never
accepted, so every verification rule stays lossless whatever it drafts. It pays off when the
output copies its input (summaries, edits, extraction), and at low temperature.

A :class:`PromptLookup` is a function of prefixes: use it as ``PrefixLM(PromptLookup(V))``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from otlp.args import positive_int
from otlp.decoding.models.base import FloatArray, IntArray


class PromptLookup:
    """Next-token laws of the prompt-lookup draft over ``vocab_size`` tokens."""

    def __init__(self, vocab_size: int, *, ngram: int = 3) -> None:
        self.vocab_size = positive_int("vocab_size", vocab_size)
        self.ngram = positive_int("ngram", ngram)

    def batch(self, prefixes: IntArray) -> FloatArray:
        """Laws after each row of ``prefixes`` ``(m, d)``: one-hot or uniform, ``(m, V)``."""
        prefixes = np.asarray(prefixes, dtype=np.int64)
        out = np.zeros((prefixes.shape[0], self.vocab_size))
        for i, prefix in enumerate(prefixes):
            token = lookup(prefix.tolist(), self.ngram)
            if token is None or not 0 <= token < self.vocab_size:
                out[i] = 1.0 / self.vocab_size
            else:
                out[i, token] = 1.0
        return out

    def __repr__(self) -> str:
        return f"PromptLookup(V={self.vocab_size}, ngram={self.ngram})"


def lookup(context: Sequence[int], ngram: int) -> int | None:
    """The token after the most recent earlier occurrence of the longest recurring suffix of
    ``context`` (length ``ngram`` down to 1), or None."""
    seq = list(context)
    for n in range(min(ngram, len(seq) - 1), 0, -1):
        suffix = seq[-n:]
        for start in range(len(seq) - n - 1, -1, -1):
            if seq[start : start + n] == suffix:
                return seq[start + n]
    return None
