"""What inference engines pass to their verifier, turned into otlp's layout.

vLLM's rejection sampler and FlashInfer's ``chain_speculative_sampling`` take a batch of
chains as draft probabilities ``(B, k, V)`` beside target probabilities ``(B, k + 1, V)`` (the
target's extra row is the bonus position; no draft row exists there), vLLM the target as
logits with a per-request temperature, top-k and top-p, a ``torch.Generator`` per seeded
request, and both return output ids ``(B, k + 1)`` padded with a placeholder (-1, vLLM's
``PLACEHOLDER_TOKEN_ID``) beside the accepted counts. :func:`otlp.decoding.verify_chain`
takes those directly: ``q`` with k rows is read as is (the row after the last draft is never
needed), :func:`target_laws` turns logits into the target law the engine samples from, and
:attr:`otlp.verification.tree.TreeVerification.output_ids` is the padded output.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from otlp.args import real_number

PLACEHOLDER_TOKEN_ID = -1  # pads output_ids after a row's emitted tokens (as vLLM)


def target_laws(
    logits: Any,
    temperature: ArrayLike,
    top_k: ArrayLike | None = None,
    top_p: ArrayLike | None = None,
) -> Any:
    """The target's sampling law from its logits ``(B, L + 1, V)``, in their library and dtype.

    softmax(logits / temperature) per row (``temperature`` a number or one per row; 0 =
    greedy: one-hot on the argmax, lowest id on ties), then restricted to its ``top_k``
    largest entries (renormalised), then to the smallest head of entries (by decreasing
    probability, ties by id) whose mass reaches ``top_p``, renormalised. ``top_k``/``top_p``
    are numbers or one per row (None: no restriction; top_k 0 or >= V and top_p 1 keep
    everything).
    """
    torch_input = type(logits).__module__.startswith("torch")
    if not torch_input:
        logits = np.asarray(logits)
        if not np.issubdtype(logits.dtype, np.floating):
            raise ValueError(f"p: logits must be floating point, got dtype {logits.dtype}")
    if len(logits.shape) != 3:
        raise ValueError(f"p: expected logits of shape (B, L + 1, V), got {tuple(logits.shape)}")
    rows, vocab = int(logits.shape[0]), int(logits.shape[2])
    temps = _per_row("temperature", temperature, rows, minimum=0.0)
    ks = None if top_k is None else _per_row("top_k", top_k, rows, minimum=0.0, integer=True)
    ps = None if top_p is None else _per_row("top_p", top_p, rows, minimum=0.0, maximum=1.0)
    if ps is not None and np.any(ps <= 0):
        raise ValueError("top_p: expected values in (0, 1]")
    if torch_input:
        return _torch_laws(logits, temps, ks, ps, vocab)
    out = np.empty(logits.shape, dtype=logits.dtype)
    for b in range(rows):
        out[b] = _numpy_law(logits[b], temps[b], ks, ps, b, vocab)
    return out


def _per_row(
    name: str,
    value: ArrayLike,
    rows: int,
    *,
    minimum: float,
    maximum: float | None = None,
    integer: bool = False,
) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a number or one per row, got {value!r}") from None
    if arr.ndim == 0:
        arr = np.full(rows, float(arr))
    if arr.shape != (rows,):
        raise ValueError(f"{name}: expected a number or one per row ({rows}), got {arr.shape}")
    for b, v in enumerate(arr):
        real_number(f"{name}[{b}]", float(v), minimum=minimum, maximum=maximum)
        if integer and v != int(v):
            raise ValueError(f"{name}[{b}]: expected an integer, got {v:g}")
    return arr


def _numpy_law(
    logits: np.ndarray,
    temperature: float,
    ks: np.ndarray | None,
    ps: np.ndarray | None,
    b: int,
    vocab: int,
) -> np.ndarray:
    if temperature == 0:
        law = np.zeros_like(logits)
        law[np.arange(logits.shape[0]), np.argmax(logits, axis=-1)] = 1
        return law
    scaled = logits / logits.dtype.type(temperature)
    law = np.exp(scaled - scaled.max(axis=-1, keepdims=True))
    law /= law.sum(axis=-1, keepdims=True)
    k = 0 if ks is None else int(ks[b])
    if 0 < k < vocab:
        kth = -np.partition(-law, k - 1, axis=-1)[:, k - 1 : k]
        law = np.where(law >= kth, law, 0)
        law /= law.sum(axis=-1, keepdims=True)  # top-p then reads the top-k law (as vLLM)
    if ps is not None and ps[b] < 1:
        order = np.argsort(-law, axis=-1, kind="stable")
        ranked = np.take_along_axis(law, order, axis=-1)
        before = np.cumsum(ranked, axis=-1) - ranked  # mass ranked above each entry
        keep = np.zeros(law.shape, dtype=bool)
        np.put_along_axis(keep, order, before < ps[b], axis=-1)
        law = np.where(keep, law, 0)
    return law / law.sum(axis=-1, keepdims=True)


def _torch_laws(
    logits: Any, temps: np.ndarray, ks: np.ndarray | None, ps: np.ndarray | None, vocab: int
) -> Any:
    import torch

    out = torch.empty_like(logits)
    for b in range(logits.shape[0]):
        row = logits[b]
        if temps[b] == 0:
            law = torch.zeros_like(row)
            law.scatter_(-1, row.argmax(dim=-1, keepdim=True), 1.0)
            out[b] = law
            continue
        law = torch.softmax(row / float(temps[b]), dim=-1)
        k = 0 if ks is None else int(ks[b])
        if 0 < k < vocab:
            kth = law.topk(k, dim=-1).values[:, k - 1 : k]
            law = torch.where(law >= kth, law, torch.zeros_like(law))
            law = law / law.sum(dim=-1, keepdim=True)
        if ps is not None and ps[b] < 1:
            ranked, order = law.sort(dim=-1, descending=True, stable=True)
            before = ranked.cumsum(dim=-1) - ranked
            keep = torch.zeros_like(law, dtype=torch.bool)
            keep.scatter_(-1, order, before < float(ps[b]))
            law = torch.where(keep, law, torch.zeros_like(law))
        out[b] = law / law.sum(dim=-1, keepdim=True)
    return out
