"""Target and draft laws at the contexts of a draft tree, read row by row as given.

The caller's arrays (numpy float16/float32/float64, ml_dtypes bfloat16, torch tensors of any
float dtype on any device, or lists) stay as they are; only the contexts a verification visits
are read, each checked once per call at the tolerance of the input's precision by one compiled
pass over the row in its own dtype (:func:`otlp.solvers.node_rules.row_total`; its errors those of
:func:`otlp.tensors.check_distributions`'s). The compiled rules (sps, rrs, K-SEQ, SpecHub,
block, GBV) read the rows as given (:meth:`ContextLaws.native`, 16-bit rows widened one at a
time); global resolution, maxflow_cs and any top-k restriction take a renormalised float64
copy of the rows they visit (:meth:`ContextLaws.row`). A decode step never copies the whole
``(B, N + 1, V)`` tensor. Laws computed on demand (:class:`LazyLaws`, e.g. the target's from
its logits: :class:`otlp.verification.engine_layouts.LogitLaws`) are computed only at the
contexts read, and read row by row.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from otlp.args import real_number
from otlp.solvers.arrays import FloatArray, IntArray
from otlp.solvers.node_rules import row_total
from otlp.tensors import ArrayKind, as_float64, float_kind, is_torch


class LazyLaws:
    """Laws ``(B, N + 1, V)`` computed one context at a time when read: ``shape``, ``kind``
    (the input's :class:`~otlp.tensors.ArrayKind`, which results go back in) and
    :meth:`row`."""

    shape: tuple[int, ...]
    kind: ArrayKind

    def row(self, b: int, context: int) -> NDArray[np.floating]:
        """Row ``b``'s law at ``context``: a numpy float32 or float64 vector ``(V,)``."""
        raise NotImplementedError


class ContextLaws:
    """Laws ``(B, N + 1, V)`` (``name`` = "p" or "q") of one input, read a few contexts at a
    time; ``kind`` says where the input came from (results go back in it). With
    ``last_optional`` the last context's row may be missing (``(B, N, V)``: a chain's draft
    laws as engines pass them; the last context has no children, so no draft is read there)."""

    def __init__(
        self,
        name: str,
        value: object,
        shape: tuple[int, int],
        atol: float | None,
        *,
        last_optional: bool = False,
    ):
        self.name = name
        self.lazy = isinstance(value, LazyLaws)
        if isinstance(value, LazyLaws):
            self.kind = value.kind
            self.values: Any = value
        elif (isinstance(value, np.ndarray) or is_torch(value)) and len(
            cast(Any, value).shape
        ) == 3:
            self.kind = float_kind(name, value)  # from the dtype: no value read, no copy
            self.values = value
        elif hasattr(value, "shape") and hasattr(value, "dtype") and len(value.shape) == 3:
            _, self.kind = as_float64(name, cast(Any, value)[:0])  # the kind, no copy
            self.values = value
        else:
            self.values, self.kind = as_float64(name, value)
        self.torch = self.kind.library == "torch"
        shapes = [shape, (shape[0], shape[1] - 1)] if last_optional else [shape]
        if len(self.values.shape) != 3 or tuple(self.values.shape[:2]) not in shapes:
            also = f" or ({shape[0]}, {shape[1] - 1}, V)" if last_optional else ""
            raise ValueError(
                f"{name}: expected shape (B, N + 1, V) = ({shape[0]}, {shape[1]}, V){also}, got "
                f"{tuple(self.values.shape)}"
            )
        self.vocab = int(self.values.shape[2])
        if self.vocab == 0:
            raise ValueError(f"{name}: empty vocabulary, shape {tuple(self.values.shape)}")
        self.atol = (
            self.kind.sum_tolerance if atol is None else real_number("atol", atol, minimum=0.0)
        )

        self._totals: dict[tuple[int, int], float] = {}

    def native(self, b: int, context: int) -> NDArray[np.floating]:
        """One context's row as given, as a numpy vector the row kernels read: float32 and
        float64 rows are views (torch: on the CPU), 16-bit rows are widened to float32
        (exactly)."""
        if self.lazy:
            return cast(LazyLaws, self.values).row(b, context)
        row = self.values[b, context]
        if self.torch:
            import torch

            row = row.detach()
            if row.device.type != "cpu":
                row = row.cpu()
            if row.dtype not in (torch.float32, torch.float64):
                row = row.to(torch.float32)
            return cast("NDArray[np.floating]", row.numpy())
        if row.dtype not in (np.float32, np.float64):
            return np.asarray(row, dtype=np.float32)
        return cast("NDArray[np.floating]", row)

    def native_all(self) -> NDArray[np.floating] | None:
        """The whole ``(B, N + 1, V)`` input as a numpy view (numpy or CPU torch, float32 or
        float64), or None where it cannot be read without a copy (or is computed on demand)."""
        if self.lazy:
            return None
        values = self.values
        if self.torch:
            import torch

            values = values.detach()
            if values.device.type != "cpu" or values.dtype not in (torch.float32, torch.float64):
                return None
            values = values.numpy()
        if values.dtype not in (np.float32, np.float64) or not values.flags.c_contiguous:
            return None
        return cast("NDArray[np.floating]", values)

    def refuse(self, b: int, context: int) -> None:
        """Raise the ``ValueError`` of a row that failed its check (negative, NaN or infinite
        entries, or a sum off 1 by more than ``atol``), naming it."""
        native = self.native(b, context)
        total, bad = row_total(native)
        label = f"{self.name}[{b}, {context}]"
        if bad >= 0:
            raise ValueError(f"{label}: has a negative, NaN or infinite entry")
        raise ValueError(f"{label}: does not sum to 1 within atol {self.atol:g} (sum {total!r})")

    def native_rows(self, b: int, contexts: IntArray) -> tuple[NDArray[np.floating], IntArray]:
        """The rows at ``contexts`` as given: a 2-D array and each context's row in it (row
        b's whole ``(N + 1, V)`` view for numpy and CPU torch float32/float64 input, else the
        gathered rows)."""
        whole = None if self.lazy else self._whole_row(b)
        if whole is not None:
            return whole, contexts
        gathered = np.stack([self.native(b, int(c)) for c in contexts])
        return gathered, np.arange(contexts.shape[0], dtype=np.int64)

    def _whole_row(self, b: int) -> NDArray[np.floating] | None:
        """Row b's ``(N + 1, V)`` laws as a numpy view where the input is readable as given
        (numpy or CPU torch float32/float64), else None."""
        values = self.values[b]
        if self.torch:
            import torch

            values = values.detach()
            if values.device.type == "cpu" and values.dtype in (torch.float32, torch.float64):
                return cast("NDArray[np.floating]", values.numpy())
        elif values.dtype in (np.float32, np.float64):
            return cast("NDArray[np.floating]", values)
        return None

    def total(self, b: int, context: int, row: NDArray[np.floating] | None = None) -> float:
        """The sum of a context's law, checked once per call (finite, nonnegative, summing to
        1 within ``atol``) in one compiled pass over the row as given."""
        key = (b, context)
        known = self._totals.get(key)
        if known is not None:
            return known
        native = self.native(b, context) if row is None else row
        total, bad = row_total(native)
        if bad >= 0 or abs(total - 1.0) > self.atol:
            self.refuse(b, context)
        self._totals[key] = total
        return total

    def values_at(self, b: int, contexts: IntArray, tokens: IntArray) -> FloatArray:
        """Single entries ``values[b, contexts, tokens]`` as given, float64 (rows unread, except
        laws computed on demand)."""
        if self.lazy:
            picked = [
                self.native(b, int(c))[int(t)]
                for c, t in zip(contexts.flat, tokens.flat, strict=True)
            ]
            return np.array(picked, dtype=np.float64).reshape(np.shape(contexts))
        if self.torch:
            import torch

            device = self.values.device
            picked = self.values[b][
                torch.as_tensor(contexts, device=device), torch.as_tensor(tokens, device=device)
            ]
            return cast(FloatArray, picked.detach().to(torch.float64).cpu().numpy())
        return np.asarray(self.values[b][contexts, tokens]).astype(np.float64)

    def row(self, b: int, context: int) -> FloatArray:
        """One context's law, checked and renormalised, float64 ``(V,)``."""
        native = self.native(b, context)
        return native.astype(np.float64) / self.total(b, context, native)

    def raw(self, b: int, contexts: IntArray) -> FloatArray:
        """The laws at ``contexts`` of row ``b`` widened to float64 ``(m, V)``, as given."""
        return np.stack([self.native(b, int(c)).astype(np.float64) for c in contexts])

    def checked(self, b: int, contexts: IntArray, raw: FloatArray) -> FloatArray:
        """``raw`` (from :meth:`raw`) checked at the input's tolerance and renormalised."""
        totals = [self.total(b, int(c), raw[j]) for j, c in enumerate(contexts)]
        return raw / np.array(totals)[:, None]

    def rows(self, b: int, contexts: IntArray) -> FloatArray:
        """The laws at ``contexts`` of row ``b``: checked, renormalised float64 ``(m, V)``."""
        return self.checked(b, contexts, self.raw(b, contexts))
