"""What inference engines pass to their verifier, turned into otlp's layout.

vLLM's rejection sampler and FlashInfer's ``chain_speculative_sampling`` take a batch of
chains as draft probabilities ``(B, k, V)`` beside target probabilities ``(B, k + 1, V)`` (the
target's extra row is the bonus position; no draft row exists there), vLLM the target as
logits with a per-request temperature, top-k and top-p, a ``torch.Generator`` per seeded
request, and both return output ids ``(B, k + 1)`` padded with a placeholder (-1, vLLM's
``PLACEHOLDER_TOKEN_ID``) beside the accepted counts. :func:`otlp.decoding.verify_chain`
takes those directly: ``q`` with k rows is read as is (the row after the last draft is never
needed), :class:`LogitLaws` turns logits into the target law the engine samples from at the
contexts the verification visits (:func:`target_laws` at every context), and
:attr:`otlp.verification.tree.TreeVerification.output_ids` is the padded output.

Temperatures: 0 is greedy (one-hot on the argmax, lowest id on ties). Any positive
temperature, however small (subnormal included), is softmax(logits / temperature) computed
in float64 after subtracting the row's maximum, so ``(logits - max) / temperature`` is finite
or -inf and never NaN: as the temperature goes to 0 the law tends to the uniform law on the
tied maxima (one-hot on the argmax where it is unique), with no warning and no overflow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otlp.args import real_number
from otlp.solvers.arrays import FloatArray
from otlp.tensors import ArrayKind, float_kind, is_torch
from otlp.verification.laws import LazyLaws

PLACEHOLDER_TOKEN_ID = -1  # pads output_ids after a row's emitted tokens (as vLLM)
_HEAD = 256  # top-p: entries ranked first at a context; doubled until their mass reaches top_p


@dataclass(frozen=True)
class Sampling:
    """A batch's sampling parameters, checked: one temperature per row and, per row, the top-k
    (None: no restriction) and top-p (None: no restriction)."""

    temperature: FloatArray
    top_k: FloatArray | None
    top_p: FloatArray | None

    @classmethod
    def of(
        cls,
        rows: int,
        temperature: ArrayLike,
        top_k: ArrayLike | None,
        top_p: ArrayLike | None,
        *,
        prefix: str = "",
    ) -> Sampling:
        """Check the parameters for ``rows`` rows; errors name ``temperature`` and
        ``{prefix}top_k`` / ``{prefix}top_p`` (the caller's argument names)."""
        temps = _per_row("temperature", temperature, rows, minimum=0.0)
        ks = None
        if top_k is not None:
            ks = _per_row(f"{prefix}top_k", top_k, rows, minimum=0.0, integer=True)
        ps = None
        if top_p is not None:
            ps = _per_row(f"{prefix}top_p", top_p, rows, minimum=0.0, maximum=1.0)
            if np.any(ps <= 0):
                raise ValueError(f"{prefix}top_p: expected values in (0, 1]")
        return cls(temps, ks, ps)

    def laws(self, b: int, logits: FloatArray) -> FloatArray:
        """Row ``b``'s target law at the contexts ``logits`` (m, V) (float64), float64."""
        vocab = logits.shape[-1]
        temperature = float(self.temperature[b])
        if temperature == 0:
            law = np.zeros_like(logits)
            law[np.arange(logits.shape[0]), np.argmax(logits, axis=-1)] = 1
            return law
        with np.errstate(over="ignore", invalid="ignore"):
            # (logits - max) <= 0 is finite, so dividing by a tiny temperature gives -inf at
            # worst (exp -> 0), never inf - inf; non-finite logits give NaN rows, refused
            # where the rows are checked
            scaled = (logits - logits.max(axis=-1, keepdims=True)) / temperature
            law = np.exp(scaled)
            law /= law.sum(axis=-1, keepdims=True)
        k = 0 if self.top_k is None else int(self.top_k[b])
        if 0 < k < vocab:
            kth = -np.partition(-law, k - 1, axis=-1)[:, k - 1 : k]
            law = np.where(law >= kth, law, 0)
            law /= law.sum(axis=-1, keepdims=True)  # top-p then reads the top-k law (as vLLM)
        if self.top_p is not None and self.top_p[b] < 1:
            for row in law:
                _top_p_head(row, float(self.top_p[b]))
        return law / law.sum(axis=-1, keepdims=True)


def _top_p_head(law: FloatArray, top_p: float) -> None:
    """Zero, in place, every entry of ``law`` outside the smallest head (by decreasing
    probability, ties by id) whose mass reaches ``top_p``, without sorting the whole row:
    the entries at or above the m-th largest (m = 256, doubled until they hold more than
    ``top_p``) are ranked, with the same cumulative sums as a sort of the whole row gives
    (the entries outside them all rank after them, so their mass above is at least the
    head's)."""
    vocab = law.shape[0]
    m = min(_HEAD, vocab)
    while True:
        if m < vocab:
            threshold = np.partition(law, vocab - m)[vocab - m]
            candidates = np.flatnonzero(law >= threshold)  # all ties at the threshold
        else:
            candidates = np.arange(vocab)
        order = candidates[np.argsort(-law[candidates], kind="stable")]
        ranked = law[order]
        through = np.cumsum(ranked)
        # outside entries have at least the candidates' mass above them: the margin keeps the
        # rounding of cumsum - entry (a few ulps of 1) from letting one in
        if m >= vocab or through[-1] >= top_p + 8 * np.finfo(np.float64).eps:
            break
        m *= 2
    keep = np.zeros(vocab, dtype=bool)
    keep[order[(through - ranked) < top_p]] = True
    law[~keep] = 0


def target_laws(
    logits: Any,
    temperature: ArrayLike,
    top_k: ArrayLike | None = None,
    top_p: ArrayLike | None = None,
) -> Any:
    """The target's sampling law from its logits ``(B, L + 1, V)``, in their library and dtype.

    softmax(logits / temperature) per row (``temperature`` a number or one per row; 0 =
    greedy: one-hot on the argmax, lowest id on ties; a positive temperature, however small,
    is computed in float64 without overflow, see the module notes), then restricted to its
    ``top_k`` largest entries (renormalised), then to the smallest head of entries (by
    decreasing probability, ties by id) whose mass reaches ``top_p``, renormalised.
    ``top_k``/``top_p`` are numbers or one per row (None: no restriction; top_k 0 or >= V and
    top_p 1 keep everything). Every context is computed; :class:`LogitLaws` computes only
    those that are read. Logits are numpy (float16/32/64, ml_dtypes bfloat16) or torch
    tensors of any floating dtype and device.
    """
    laws = LogitLaws(logits, temperature, top_k, top_p)
    out = np.empty(laws.shape, dtype=np.float64)
    for b in range(laws.shape[0]):
        out[b] = laws.sampling.laws(b, laws.logits_rows(b, slice(None)))
    return laws.in_input_dtype(out)


class LogitLaws(LazyLaws):
    """The target laws ``(B, L + 1, V)`` defined by logits and sampling parameters (as
    :func:`target_laws`), computed one context at a time when a verification reads it and
    kept for the call: a verification visits a few contexts per row, so a top-p at
    V = 128,256 costs its visited contexts only. Rows come back in the logits' dtype as
    :func:`target_laws` gives them (16-bit ones widened to float32), so the outcome equals
    the one on :func:`target_laws`' output. ``prefix`` goes before ``top_k`` / ``top_p`` in
    error messages (``"target_"`` for :func:`otlp.decoding.verify_chain`'s arguments)."""

    def __init__(
        self,
        logits: Any,
        temperature: ArrayLike,
        top_k: ArrayLike | None = None,
        top_p: ArrayLike | None = None,
        *,
        prefix: str = "",
    ):
        if not is_torch(logits):
            logits = np.asarray(logits)
        self.kind: ArrayKind = float_kind("p", logits)  # the dtype checked, nothing read
        if len(logits.shape) != 3:
            raise ValueError(
                f"p: expected logits of shape (B, L + 1, V), got {tuple(logits.shape)}"
            )
        self.logits = logits
        self.shape = tuple(int(s) for s in logits.shape)
        self.sampling = Sampling.of(self.shape[0], temperature, top_k, top_p, prefix=prefix)
        self._rows: dict[tuple[int, int], NDArray[np.floating]] = {}

    def logits_rows(self, b: int, contexts: int | slice) -> FloatArray:
        """Row ``b``'s logits at ``contexts`` as float64 numpy ``(m, V)``."""
        block = self.logits[b, contexts]
        if is_torch(block):
            import torch

            block = block.detach().to(device="cpu", dtype=torch.float64).numpy()
        return np.asarray(block, dtype=np.float64).reshape(-1, self.shape[2])

    def in_input_dtype(self, laws: FloatArray) -> Any:
        """Float64 laws in the logits' library, dtype and device."""
        if self.kind.library == "torch":
            import torch

            return torch.from_numpy(laws).to(device=self.logits.device, dtype=self.logits.dtype)
        return laws.astype(self.logits.dtype)

    def row(self, b: int, context: int) -> NDArray[np.floating]:
        """The law at one context as a numpy float32/float64 vector (computed once)."""
        key = (b, context)
        known = self._rows.get(key)
        if known is None:
            law = self.sampling.laws(b, self.logits_rows(b, context))[0]
            known = self._rows[key] = self._rounded(law)
        return known

    def _rounded(self, law: FloatArray) -> NDArray[np.floating]:
        """A float64 law rounded to the logits' dtype (as :func:`target_laws` returns it), on
        the CPU, 16-bit dtypes widened back to float32 (exactly) for the row kernels."""
        if self.kind.library == "torch":
            import torch

            rounded = torch.from_numpy(law).to(self.logits.dtype)
            if rounded.dtype not in (torch.float32, torch.float64):
                rounded = rounded.to(torch.float32)
            return np.asarray(rounded.numpy())
        out = law.astype(self.logits.dtype)
        return out if out.dtype in (np.float32, np.float64) else out.astype(np.float32)


def _per_row(
    name: str,
    value: ArrayLike,
    rows: int,
    *,
    minimum: float,
    maximum: float | None = None,
    integer: bool = False,
) -> FloatArray:
    """``value`` (a number or one per row) as ``rows`` checked float64 values, errors naming
    ``name`` (and the row)."""
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
