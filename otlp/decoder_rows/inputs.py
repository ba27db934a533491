"""A decoder call's inputs as every row path reads them (:class:`DecoderBatch`), and the steps of
one row shared by all rules: its Instance and the draw from a local law."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from otlp.args import real_number
from otlp.instance import Instance
from otlp.solvers.global_resolution.token import draw
from otlp.tensors import as_float64, as_index_array, check_distributions


def batch_arrays(
    p: object, q: object, drafts: object, atol: object, *, draft_rows: int = 1
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64], float]:
    """p as (1 or B, V), q as (1 or B, draft_rows, V) float64 arrays, drafts as (B, n) int64,
    and the kernel's atol: the one reading path of every ``verify_drafts`` input.

    q holds one row per draw: ``draft_rows = 1`` (i.i.d., without replacement, greedy) takes
    q of shape (V,) or (B, V); ``draft_rows = 2`` (two independent drafters) takes (2, V) or
    (B, 2, V). Every array goes through :func:`otlp.tensors.as_float64` (numpy, ml_dtypes,
    torch of any floating dtype and device, lists), and each distribution is judged at its
    own precision (:func:`otlp.tensors.sum_tolerance`) unless ``atol`` is given; both are
    computed on in float64, so a float64 q is never rounded to a float32 p's precision.
    Returns the looser tolerance for the compiled scan once the stricter array has been
    checked here.
    """
    p_arr, p_kind = as_float64("p", p)
    if p_arr.ndim not in (1, 2) or p_arr.shape[-1] == 0:
        raise ValueError(f"p: expected shape (V,) or (B, V), got {p_arr.shape}")
    q_arr, q_kind = as_float64("q", q)
    if draft_rows == 1 and (q_arr.ndim not in (1, 2) or q_arr.shape[-1] == 0):
        raise ValueError(f"q: expected shape (V,) or (B, V), got {q_arr.shape}")
    if draft_rows > 1 and (q_arr.ndim not in (2, 3) or q_arr.shape[-2] != draft_rows):
        raise ValueError(
            f"q: scheme 'independent' takes one row per draft, shape ({draft_rows}, V) or "
            f"(B, {draft_rows}, V), got {q_arr.shape}"
        )
    p_arr = p_arr.reshape(-1, p_arr.shape[-1])
    q_arr = q_arr.reshape(-1, draft_rows, q_arr.shape[-1])
    if p_arr.shape[1] != q_arr.shape[-1]:
        raise ValueError(f"q: vocabulary size {q_arr.shape[-1]} differs from p's {p_arr.shape[1]}")
    vocab = p_arr.shape[1]
    draft_arr, _ = as_index_array("drafts", drafts, size=vocab)
    if draft_arr.ndim != 2 or 0 in draft_arr.shape:
        raise ValueError(f"drafts: expected shape (B, n) with B, n >= 1, got {draft_arr.shape}")
    rows = draft_arr.shape[0]
    for name, arr in (("p", p_arr), ("q", q_arr)):
        if arr.shape[0] not in (1, rows):
            raise ValueError(f"{name}: {arr.shape[0]} rows for {rows} rows of drafts")
    if atol is not None:
        return p_arr, q_arr, draft_arr, real_number("atol", atol, minimum=0.0)
    tolerances = (p_kind.sum_tolerance, q_kind.sum_tolerance)
    if tolerances[0] != tolerances[1]:  # the compiled scan takes one atol: check the stricter
        name, arr, tol = (
            ("p", p_arr, tolerances[0])
            if tolerances[0] < tolerances[1]
            else ("q", q_arr if draft_rows > 1 else q_arr[:, 0], tolerances[1])
        )
        check_distributions(name, arr, tol)
    return p_arr, q_arr, draft_arr, max(tolerances)


def row(arr: NDArray, b: int) -> NDArray:
    """Row ``b`` of a batch array held once for every row (leading size 1) or per row."""
    return arr[0] if arr.shape[0] == 1 else arr[b]


@dataclass(frozen=True)
class DecoderBatch:
    """A decoder call's checked inputs as every row path reads them: ``p`` (1 or B, V) and
    ``q`` (1 or B, d, V) as :func:`batch_arrays` returns them (one draft row per draw: d = 2
    for two independent drafters, else 1), ``drafts`` (B, n) int64, each row's ``uniforms``
    (B, m), the draft ``scheme``, ``top_k`` (None: every token of positive draft
    probability) and the tolerance ``atol`` of the sums."""

    p: NDArray
    q: NDArray
    drafts: NDArray[np.int64]
    uniforms: NDArray[np.float64]
    scheme: str
    top_k: int | None
    atol: float

    @classmethod
    def of_row(
        cls,
        p: NDArray,
        q: NDArray,
        drafts: NDArray,
        uniforms: NDArray,
        *,
        scheme: str,
        top_k: int | None,
        atol: float,
    ) -> DecoderBatch:
        """A batch of one row (a tree node's): ``p`` (V,), ``q`` (V,) or (d, V), ``drafts``
        (n,) and its ``uniforms``."""
        return cls(
            p[None, :],
            (q if q.ndim == 2 else q[None, :])[None],
            np.ascontiguousarray(drafts[None, :], dtype=np.int64),
            np.ascontiguousarray(uniforms[None, :], dtype=np.float64),
            scheme,
            top_k,
            atol,
        )

    def instance(self, b: int) -> Instance:
        """Row ``b``'s Instance (its target row, its draft rows: the pair of an independent
        drafters' row, else the one draft row; its n drafts); its errors name the row
        (``p[b]: ...``)."""
        q = row(self.q, b)
        q_arg = list(q) if self.scheme == "independent" else q[0]
        n = self.drafts.shape[1]
        try:
            return Instance(row(self.p, b), q_arg, n, self.scheme, top_k=self.top_k, atol=self.atol)
        except ValueError as exc:
            name, _, rest = str(exc).partition(":")
            raise ValueError(f"{name}[{b}]:{rest}") from None


def draw_token(inst: Instance, probs: NDArray[np.float64], u: NDArray[np.float64]) -> int:
    """One token from the local law ``probs`` (the last entry: outside the draft vocabulary,
    spread in proportion to p), with the fused path's two uniforms ``u``."""
    return int(draw(np.clip(probs, 0.0, None), inst.p, inst.tokens, u[0], u[1]))
