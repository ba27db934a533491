"""The status of a decoder row: one enum for every compiled kernel that checks or verifies rows.

The fused global-resolution rows (:mod:`.global_resolution.token`,
:mod:`.global_resolution.scheme_token`), partial resolution's rows
(:mod:`.partial_resolution_row`) and the tree walks (:mod:`.node_rules`) report a row they
refuse, or hand on, with one of these codes; the caller names the argument and row at fault
(:func:`otlp.decoder_rows.checks.raise_for_row_status` for the position rows,
:class:`otlp.verification.tree.TreeVerification`'s checks for the trees). The compiled kernels
read the plain integers below (numba freezes module globals when it compiles), each defined
from the enum, so a code has one home.
"""

from enum import IntEnum


class RowStatus(IntEnum):
    """What became of one row (the kernels' first status column)."""

    OK = 0  # verified: the row's token is in the kernel's output
    FALLBACK = 1  # global resolution could not certify the row's unit: the caller solves it
    BAD_P = 2  # the target row has a negative, NaN or infinite entry
    BAD_Q = 3  # a draft row has a negative, NaN or infinite entry
    SUM_P = 4  # the target row does not sum to 1 within atol
    SUM_Q = 5  # a draft row does not sum to 1 within atol
    BAD_DRAFT = 6  # a drafted token cannot be drafted (probability 0, outside the top-k draft,
    # or not a greedy draft tuple)
    BAD_TARGET_ROW = 7  # a tree walk: the target row at a context fails its check
    BAD_DRAFT_ROW = 8  # a tree walk: the draft row at a context fails its check
    REPEATED = 9  # drafts without replacement repeat a token
    NOT_HUB = 10  # a SpecHub pair lacks the hub argmax q
    TOO_MANY = 11  # more than two SpecHub drafts at a node


OK = RowStatus.OK.value
FALLBACK = RowStatus.FALLBACK.value
BAD_P = RowStatus.BAD_P.value
BAD_Q = RowStatus.BAD_Q.value
SUM_P = RowStatus.SUM_P.value
SUM_Q = RowStatus.SUM_Q.value
BAD_DRAFT = RowStatus.BAD_DRAFT.value
BAD_TARGET_ROW = RowStatus.BAD_TARGET_ROW.value
BAD_DRAFT_ROW = RowStatus.BAD_DRAFT_ROW.value
REPEATED = RowStatus.REPEATED.value
NOT_HUB = RowStatus.NOT_HUB.value
TOO_MANY = RowStatus.TOO_MANY.value
