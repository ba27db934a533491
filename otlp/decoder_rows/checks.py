"""One decoder row's checks, the same for every rule of :func:`otlp.verify_drafts`: the O(V)
scans of p and each draft row, the top-k restriction, the drafts the scheme can produce, and
the one message per refusal (:class:`~otlp.solvers.row_status.RowStatus`) naming the argument
and row at fault."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

import numpy as np
from numpy.typing import NDArray

from otlp.decoder_rows.inputs import DecoderBatch
from otlp.instance import impossible_draw
from otlp.solvers.arrays import FloatArray, IntArray
from otlp.solvers.global_resolution.scheme_token import greedy_last, independent_vocabulary
from otlp.solvers.global_resolution.sorting import top_tokens
from otlp.solvers.global_resolution.token import local_drafts, restrict, scan
from otlp.solvers.row_status import BAD_DRAFT, BAD_P, BAD_Q, OK, SUM_P, SUM_Q


@dataclass(frozen=True)
class RowVocabulary:
    """A row restricted to its draft vocabulary: global ids, p there, the draft rows there
    (one for without replacement and greedy, two for independent drafts), p outside."""

    tokens: IntArray
    p_local: FloatArray
    rows: FloatArray
    p_outside: float


def row_vocabulary(
    p: NDArray, q_rows: NDArray, scheme: str, top_k: int, atol: float
) -> tuple[int, int, RowVocabulary | None]:
    """(status, offending draft row, vocabulary): the O(V) scans, top-k and restriction."""
    sums = []
    for d in range(q_rows.shape[0]):
        status, p_sum, q_sum = scan(p, q_rows[d], atol)
        if status != OK:
            return status, d, None
        sums.append(q_sum)
    if scheme == "independent":
        tokens, p_local, q1, q2, p_outside = independent_vocabulary(
            p, q_rows[0], q_rows[1], top_k, p_sum, sums[0], sums[1]
        )
        return OK, 0, RowVocabulary(tokens, p_local, np.stack((q1, q2)), p_outside)
    tokens = top_tokens(q_rows[0], top_k)
    p_local, q_local, p_outside = restrict(p, q_rows[0], tokens, p_sum, sums[0])
    return OK, 0, RowVocabulary(tokens, p_local, q_local[None, :], p_outside)


def checked_row(
    p: NDArray, q_rows: NDArray, drafts: IntArray, scheme: str, top_k: int, atol: float
) -> tuple[int, int, RowVocabulary | None, IntArray | None]:
    """(status, detail, vocabulary, the drafts' local ids): one decoder row's inputs and
    drafts checked the same way for every method of ``verify_drafts``: the row's vocabulary
    (:func:`row_vocabulary`), then its drafts (:func:`checked_drafts`)."""
    status, bad_row, vocab = row_vocabulary(p, q_rows, scheme, top_k, atol)
    if vocab is None:
        return status, bad_row, None, None
    status, detail, local = checked_drafts(vocab, drafts, scheme)
    return status, detail, vocab, local


def checked_drafts(
    vocab: RowVocabulary, drafts: IntArray, scheme: str
) -> tuple[int, int, IntArray | None]:
    """(status, detail, the drafts' local ids) of a row's ``drafts`` on its checked
    vocabulary: drafts that the scheme cannot produce give ``BAD_DRAFT`` and the first
    impossible position (:func:`otlp.instance.impossible_draw`: token d from draft row d), or
    -1 for a greedy tuple that is not the top n - 1 tokens plus one other."""
    local = local_drafts(vocab.tokens, drafts)
    position = impossible_draw(vocab.rows, local)
    if position >= 0:
        return BAD_DRAFT, position, None
    if scheme == "greedy" and greedy_last(local, drafts.shape[0]) < 0:
        return BAD_DRAFT, -1, None
    return OK, 0, local


# The message of each refusal of a row's arrays.
_ROW_ERRORS = {
    BAD_P: "{name}: has a negative, NaN or infinite entry",
    BAD_Q: "{name}: has a negative, NaN or infinite entry",
    SUM_P: "{name}: does not sum to 1 within atol",
    SUM_Q: "{name}: does not sum to 1 within atol",
}


def raise_for_bad_rows(table: NDArray, batch: DecoderBatch) -> None:
    """The first refused row's ``ValueError`` (:func:`raise_for_row_status`) in a compiled
    batch's ``table`` (status, detail, ...), if any."""
    bad = np.flatnonzero(table[:, 0] >= BAD_P)
    if bad.size:
        b = int(bad[0])
        raise_for_row_status(int(table[b, 0]), int(table[b, 1]), b, batch)


def raise_for_row_status(status: int, detail: int, b: int, batch: DecoderBatch) -> NoReturn:
    """The ``ValueError`` of row ``b`` of ``batch``, which a kernel or :func:`checked_row`
    refused with ``status`` (a :class:`~otlp.solvers.row_status.RowStatus` code) and
    ``detail`` (the draw at fault, or the drafter of an independent pair's row): one message
    per code for every scheme, naming the argument and the row as the caller passed them."""
    drafts, independent = batch.drafts, batch.scheme == "independent"
    if status == BAD_DRAFT:
        if detail < 0:
            raise ValueError(
                f"drafts[{b}]: {drafts[b].tolist()} is not a greedy draft tuple (the top "
                f"{drafts.shape[1] - 1} draft tokens plus one other token of positive probability)"
            )
        drafter = f" by its drafter q[{b if batch.q.shape[0] > 1 else 0}, {detail}]"
        raise ValueError(
            f"drafts[{b}, {detail}]: token {int(drafts[b, detail])} cannot be drafted"
            f"{drafter if independent else ''} (draft probability 0, or outside "
            "the top-k draft)"
        )
    if status in (BAD_P, SUM_P):
        name = f"p[{b if batch.p.shape[0] > 1 else 0}]"
    else:
        row = b if batch.q.shape[0] > 1 else 0
        name = f"q[{row}, {detail}]" if independent else f"q[{row}]"
    raise ValueError(_ROW_ERRORS[status].format(name=name))
