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

from otlp.args import real_number
from otlp.tensors import as_float64, check_distributions

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


class ContextLaws:
    """Laws ``(B, N + 1, V)`` (``name`` = "p" or "q") of one input, read a few contexts at a
    time; ``kind`` says where the input came from (results go back in it)."""

    def __init__(self, name: str, value: object, shape: tuple[int, int], atol: float | None):
        self.name = name
        if hasattr(value, "shape") and hasattr(value, "dtype") and len(value.shape) == 3:
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

    def raw(self, b: int, contexts: IntArray) -> FloatArray:
        """The laws at ``contexts`` of row ``b`` widened to float64 ``(m, V)``, as given."""
        if self.torch:
            import torch

            index = torch.as_tensor(contexts, device=self.values.device)
            return as_float64(self.name, self.values[b].index_select(0, index))[0]
        return as_float64(self.name, self.values[b, contexts])[0]

    def checked(self, b: int, contexts: IntArray, raw: FloatArray) -> FloatArray:
        """``raw`` (from :meth:`raw`) checked at the input's tolerance and renormalised."""
        for j, context in enumerate(contexts):
            check_distributions(f"{self.name}[{b}, {int(context)}]", raw[j], self.atol)
        return raw / raw.sum(axis=1, keepdims=True)

    def rows(self, b: int, contexts: IntArray) -> FloatArray:
        """The laws at ``contexts`` of row ``b``: checked, renormalised float64 ``(m, V)``."""
        return self.checked(b, contexts, self.raw(b, contexts))

    def values_at(self, b: int, contexts: IntArray, tokens: IntArray) -> FloatArray:
        """Single entries ``values[b, contexts, tokens]`` as given, float64 (rows unread)."""
        if self.torch:
            import torch

            device = self.values.device
            picked = self.values[b][
                torch.as_tensor(contexts, device=device), torch.as_tensor(tokens, device=device)
            ]
            return as_float64(self.name, picked)[0]
        return as_float64(self.name, np.asarray(self.values[b][contexts, tokens]))[0]

    def row(self, b: int, context: int) -> FloatArray:
        """One context's law, float64 ``(V,)``."""
        return self.rows(b, np.array([context], dtype=np.int64))[0]
