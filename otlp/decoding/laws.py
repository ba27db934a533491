"""Target and draft laws at the contexts of a draft tree, read row by row in float64.

The caller's arrays (numpy float16/float32/float64, ml_dtypes bfloat16, torch tensors of any
float dtype on any device, or lists) stay as they are; only the contexts a verification visits
are gathered, widened to float64 (:func:`otlp.tensors.as_float64`), checked at the tolerance
of the input's precision (:func:`otlp.tensors.check_distributions`) and renormalised, so a
decode step never copies the whole ``(B, N + 1, V)`` tensor.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from otlp.tensors import as_float64, check_distributions
from otlp.validation import real_number

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


class ContextLaws:
    """Laws ``(B, N + 1, V)`` (``name`` = "p" or "q") of one input, read a few contexts at a
    time; ``kind`` says where the input came from (results go back in it)."""

    def __init__(self, name: str, value: object, shape: tuple[int, int], atol: float | None):
        self.name = name
        if hasattr(value, "shape") and hasattr(value, "dtype"):
            _, self.kind = as_float64(name, cast(Any, value)[:0])  # the kind, no copy
            self.values: Any = value
        else:
            self.values, self.kind = as_float64(name, value)
        self.torch = self.kind.library == "torch"
        if len(self.values.shape) != 3 or tuple(self.values.shape[:2]) != shape:
            raise ValueError(
                f"{name}: expected shape (B, N + 1, V) = ({shape[0]}, {shape[1]}, V), got "
                f"{tuple(self.values.shape)}"
            )
        self.vocab = int(self.values.shape[2])
        if self.vocab == 0:
            raise ValueError(f"{name}: empty vocabulary, shape {tuple(self.values.shape)}")
        self.atol = (
            self.kind.sum_tolerance if atol is None else real_number("atol", atol, minimum=0.0)
        )

    def rows(self, b: int, contexts: IntArray) -> FloatArray:
        """The laws at ``contexts`` of row ``b``: checked, renormalised float64 ``(m, V)``."""
        if self.torch:
            import torch

            index = torch.as_tensor(contexts, device=self.values.device)
            raw = self.values[b].index_select(0, index)
        else:
            raw = self.values[b, contexts]
        arr, _ = as_float64(self.name, raw)
        for j, context in enumerate(contexts):
            check_distributions(f"{self.name}[{b}, {int(context)}]", arr[j], self.atol)
        return arr / arr.sum(axis=1, keepdims=True)

    def row(self, b: int, context: int) -> FloatArray:
        """One context's law, float64 ``(V,)``."""
        return self.rows(b, np.array([context], dtype=np.int64))[0]
