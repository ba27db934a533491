"""Target and draft laws at the contexts of a draft tree, read row by row in float64.

The caller's arrays (numpy float16/float32/float64 or ml_dtypes bfloat16, or torch tensors of
any float dtype on any device) stay as they are; only the rows a verification visits are
converted, checked (finite, nonnegative, summing to 1 within a tolerance that fits the input's
precision) and renormalised in float64, so a float32 softmax upcast never fails a 1e-6 check
and a decode step never copies the whole ``(B, N + 1, V)`` tensor.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from otlp.validation import DEFAULT_SUM_TOL, real_number

FloatArray = NDArray[np.float64]
# Sum tolerances by input precision: rounding each of V entries to the format moves the sum by
# at most its unit roundoff (float32 2^-24, float16 2^-11, bfloat16 2^-8) plus the mass of
# entries flushed to zero, so the tolerance is a few units of the format's roundoff.
SUM_TOL = {"float64": DEFAULT_SUM_TOL, "float32": 1e-4, "float16": 1e-2, "bfloat16": 2e-2}


def is_torch(value: object) -> bool:
    """Whether ``value`` is a torch tensor (without importing torch)."""
    return type(value).__module__.split(".")[0] == "torch" and hasattr(value, "detach")


def precision_name(value: Any) -> str:
    """The float format of an array or tensor: float64, float32, float16 or bfloat16."""
    name = str(value.dtype).removeprefix("torch.")
    if name not in SUM_TOL:
        raise ValueError(f"expected a float16/bfloat16/float32/float64 array, got dtype {name}")
    return name


class ContextLaws:
    """Laws ``(B, N + 1, V)`` (``name`` = "p" or "q") of one input, read one context at a time."""

    def __init__(self, name: str, value: object, shape: tuple[int, int], atol: float | None):
        self.name = name
        self.torch = is_torch(value)
        arr: Any = value if self.torch else np.asarray(value)
        try:
            precision = precision_name(arr)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
        if arr.ndim != 3 or tuple(arr.shape[:2]) != shape or arr.shape[2] == 0:
            raise ValueError(
                f"{name}: expected shape (B, N + 1, V) = ({shape[0]}, {shape[1]}, V), got "
                f"{tuple(arr.shape)}"
            )
        self.values = arr
        self.vocab = int(arr.shape[2])
        self.atol = SUM_TOL[precision] if atol is None else real_number("atol", atol, minimum=0.0)

    def rows(self, b: int, contexts: NDArray[np.int64]) -> FloatArray:
        """The laws at ``contexts`` of row ``b`` as checked, renormalised float64 ``(m, V)``."""
        if self.torch:
            import torch

            index = torch.as_tensor(contexts, device=self.values.device)
            raw = self.values[b].index_select(0, index).detach().to("cpu", torch.float64).numpy()
        else:
            raw = np.asarray(self.values[b, contexts], dtype=np.float64)
        bad = ~np.isfinite(raw).all(axis=1) | (raw < 0).any(axis=1)
        if bad.any():
            ctx = int(contexts[np.flatnonzero(bad)[0]])
            raise ValueError(f"{self.name}[{b}, {ctx}]: has a negative, NaN or infinite entry")
        totals = raw.sum(axis=1)
        off = np.abs(totals - 1.0) > self.atol
        if off.any():
            i = int(np.flatnonzero(off)[0])
            raise ValueError(
                f"{self.name}[{b}, {int(contexts[i])}]: sums to {totals[i]!r}, not 1 within "
                f"{self.atol:g} (the tolerance for this input's precision; pass atol=)"
            )
        return raw / totals[:, None]

    def row(self, b: int, context: int) -> FloatArray:
        """One context's law, float64 ``(V,)``."""
        return self.rows(b, np.array([context], dtype=np.int64))[0]

    def like(self, array: NDArray[np.int64]) -> Any:
        """``array`` in the kind of the input: numpy, or a torch tensor on its device."""
        if not self.torch:
            return array
        import torch

        return torch.as_tensor(array, device=self.values.device)
