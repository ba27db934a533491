"""Decoder inputs as models produce them: numpy, ml_dtypes or torch arrays to float64 numpy.

A language model hands its softmax over in whatever precision it ran in: numpy float16,
float32 or float64, ml_dtypes ``bfloat16``, or a torch tensor of any floating dtype on any
device. :func:`as_float64` turns such an array (or a nested list of numbers) into a float64
numpy array and an :class:`ArrayKind` that remembers where it came from, so that

* every distribution is judged at the precision it was given in
  (:attr:`ArrayKind.sum_tolerance`: a float32 softmax sums to 1 only to ~1e-5, a bfloat16 one
  to ~2e-3) while all arithmetic runs in float64 on the values the caller gave (a float64
  draft probability of 1e-60 is never rounded to a float32 zero);
* results can go back in the caller's kind (:meth:`ArrayKind.wrap`: numpy in, numpy out;
  torch in, torch out on the input's device).

:func:`as_index_array` does the same for token ids (drafts): integer arrays only, one
rectangular shape, errors naming the argument. torch and ml_dtypes are optional: neither is
imported unless the input is one of their objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from otlp.args import DEFAULT_SUM_TOL

FLOAT32_SUM_TOL = 1e-4  # a float32 softmax over 1e5 tokens drifts ~1e-5 from 1 (measured 8.9e-6)
_FLOAT64_EPS = float(np.finfo(np.float64).eps)
_FLOAT32_EPS = float(np.finfo(np.float32).eps)


def sum_tolerance(eps: float) -> float:
    """How far from 1 a distribution stored with machine epsilon ``eps`` may sum.

    float64 (and wider): ``DEFAULT_SUM_TOL`` (1e-6); float32: 1e-4, since models accumulate
    the softmax normaliser in float32 over up to ~1e5 tokens; 16-bit and narrower formats:
    2 eps (float16 1.95e-3, bfloat16 1.56e-2), because rounding each entry to nearest moves the
    sum by up to eps/2 and the normaliser is rounded once more (torch's float16/bfloat16
    softmax over 32,000-150,000 tokens measured 0.43 eps / 0.29 eps off).
    """
    if eps <= _FLOAT64_EPS:
        return DEFAULT_SUM_TOL
    if eps <= _FLOAT32_EPS:
        return FLOAT32_SUM_TOL
    return 2.0 * eps


@dataclass(frozen=True)
class ArrayKind:
    """Where an input array came from: its library, dtype name, device and precision.

    ``library`` is ``"numpy"`` or ``"torch"`` (lists count as numpy float64); ``device`` is
    the torch device string (None for numpy); ``eps`` the machine epsilon of the input dtype.
    """

    library: str
    dtype: str
    device: str | None
    eps: float

    @property
    def sum_tolerance(self) -> float:
        """The sum tolerance that fits this precision (:func:`sum_tolerance`)."""
        return sum_tolerance(self.eps)

    def wrap(self, values: NDArray[Any]) -> Any:
        """``values`` (a numpy result) in the caller's kind: unchanged for numpy input, a
        torch tensor on the input's device for torch input (dtype kept: int64 ids stay int64,
        float64 probabilities stay float64)."""
        if self.library == "numpy":
            return values
        import torch

        tensor = torch.from_numpy(np.ascontiguousarray(values))
        return tensor if self.device == "cpu" else tensor.to(self.device)


NUMPY_FLOAT64 = ArrayKind("numpy", "float64", None, _FLOAT64_EPS)


@cache
def dtype_name(dtype: np.dtype[Any]) -> str:
    """``dtype.name``, remembered: numpy builds the string anew at every read (~4 us)."""
    return dtype.name


def is_torch(value: object) -> bool:
    """True for a torch tensor, without importing torch when the caller has not."""
    return type(value).__module__.startswith("torch") and hasattr(value, "detach")


def _torch_to_numpy(name: str, value: Any, *, integer: bool) -> tuple[NDArray[Any], ArrayKind]:
    """A torch tensor detached, on the CPU, as numpy (floats widened to float64)."""
    import torch

    if not integer:
        kind = float_kind(name, value)
        return value.detach().to(device="cpu", dtype=torch.float64).numpy(), kind
    dtype = value.dtype
    kind_name = str(dtype).removeprefix("torch.")
    if dtype == torch.bool or dtype.is_floating_point or dtype.is_complex:
        raise ValueError(f"{name}: expected integer token ids, got dtype {kind_name}")
    ids = value.detach().to(device="cpu", dtype=torch.int64).numpy()
    return ids, ArrayKind("torch", kind_name, str(value.device), 0.0)


def float_kind(name: str, value: Any) -> ArrayKind:
    """The :class:`ArrayKind` of a floating numpy array (ml_dtypes included) or torch tensor,
    read from its dtype and device alone (no value is read or copied); any other dtype is a
    ``ValueError`` naming ``name``."""
    if is_torch(value):
        import torch

        dtype = value.dtype
        kind_name = str(dtype).removeprefix("torch.")
        if not dtype.is_floating_point:
            raise ValueError(f"{name}: expected a floating-point tensor, got dtype {kind_name}")
        return ArrayKind("torch", kind_name, str(value.device), float(torch.finfo(dtype).eps))
    eps = _extension_float_eps(value.dtype)
    if eps is None and not np.issubdtype(value.dtype, np.floating):
        raise ValueError(
            f"{name}: expected a float16, bfloat16, float32 or float64 array, "
            f"got dtype {value.dtype}"
        )
    if eps is None:
        eps = float(np.finfo(value.dtype).eps)
    return ArrayKind("numpy", dtype_name(value.dtype), None, eps)


def _extension_float_eps(dtype: np.dtype[Any]) -> float | None:
    """Machine epsilon of an ml_dtypes floating dtype (bfloat16, float8_*), else None."""
    if dtype.kind != "V" or dtype.names is not None:
        return None
    try:
        import ml_dtypes
    except ImportError:  # pragma: no cover - only without the optional package
        return None
    try:
        return float(ml_dtypes.finfo(dtype).eps)
    except ValueError:
        return None


def as_float64(
    name: str, value: object, *, ndims: Sequence[int] | None = None
) -> tuple[NDArray[np.float64], ArrayKind]:
    """``value`` as a C-contiguous float64 numpy array plus its :class:`ArrayKind`.

    Accepts numpy float16/float32/float64 arrays, ml_dtypes floating arrays (bfloat16,
    float8), torch floating tensors of any dtype on any device (detached and copied to the
    CPU), and nested lists/tuples of real numbers (read as float64). Refuses integer,
    boolean, complex and object arrays, ragged lists and, with ``ndims``, any other number of
    dimensions; every error is a ``ValueError`` naming ``name``. Values are only widened,
    never rounded (except long double, rounded to float64): check them with
    :func:`check_distributions` at ``kind``'s tolerance.
    """
    if is_torch(value):
        arr, kind = _torch_to_numpy(name, value, integer=False)
    elif isinstance(value, np.ndarray | np.generic):
        arr = np.asarray(value)
        kind = float_kind(name, arr)
        arr = arr.astype(np.float64, copy=False)  # float64 input: no copy
    else:
        arr = _list_to_numpy(name, value)
        if arr.dtype.kind not in "iuf":
            raise ValueError(f"{name}: expected real numbers, got {_describe(value)}")
        arr, kind = arr.astype(np.float64), NUMPY_FLOAT64
    if ndims is not None and arr.ndim not in ndims:
        raise ValueError(f"{name}: expected {_ndims_text(ndims)}, got shape {arr.shape}")
    return np.ascontiguousarray(arr), kind


def as_index_array(
    name: str, value: object, *, ndims: Sequence[int] | None = None, size: int | None = None
) -> tuple[NDArray[np.int64], ArrayKind]:
    """Token ids as a C-contiguous int64 numpy array plus the input's :class:`ArrayKind`.

    Accepts integer numpy arrays, torch integer tensors (any device) and nested lists of
    ints; refuses ragged lists, floats (even integral ones), booleans and, with ``ndims``, any
    other number of dimensions; with ``size``, ids outside [0, size). Errors name ``name``
    (and the first offending position).
    """
    if is_torch(value):
        arr, kind = _torch_to_numpy(name, value, integer=True)
    else:
        arr = _list_to_numpy(name, value)
        if arr.size == 0 and not isinstance(value, np.ndarray):
            arr = arr.astype(np.int64)  # an empty list: no ids, and no dtype to refuse
        kind = ArrayKind("numpy", dtype_name(arr.dtype), None, 0.0)
        if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"{name}: expected integer token ids, got dtype {arr.dtype}")
    if ndims is not None and arr.ndim not in ndims:
        raise ValueError(f"{name}: expected {_ndims_text(ndims)}, got shape {arr.shape}")
    if size is not None and arr.size:
        outside = (arr < 0) | (arr >= size)
        if outside.any():
            bad = tuple(int(i) for i in np.argwhere(outside)[0])
            where = f"{name}[{', '.join(map(str, bad))}]" if bad else name
            raise ValueError(f"{where}: token id {int(arr[bad])} outside [0, {size})")
    if arr.dtype == np.uint64 and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
        raise ValueError(f"{name}: token ids beyond int64")
    return np.ascontiguousarray(arr, dtype=np.int64), kind


def check_distributions(name: str, arr: NDArray[np.float64], atol: float) -> None:
    """Every slice along the last axis finite, >= 0 and summing to 1 within ``atol``.

    ``ValueError`` names the first bad row, ``name[b]`` (``name[b, i]`` for 3-D input; just
    ``name`` for a single vector).
    """
    if arr.size == 0:
        raise ValueError(f"{name}: empty array, shape {arr.shape}")
    with np.errstate(invalid="ignore", over="ignore"):
        bad_entry = ~(np.isfinite(arr) & (arr >= 0)).all(axis=-1)
        sums = arr.sum(axis=-1)
    off = np.abs(sums - 1.0) > atol
    for mask, text in ((bad_entry, "has a negative, NaN or infinite entry"), (off, None)):
        if not np.any(mask):
            continue
        where = tuple(int(i) for i in np.argwhere(np.atleast_1d(mask))[0])
        label = name if arr.ndim == 1 else f"{name}[{', '.join(map(str, where))}]"
        if text is None:
            total = float(np.atleast_1d(sums)[where])
            text = f"does not sum to 1 within atol {atol:g} (sum {total!r})"
        raise ValueError(f"{label}: {text}")


def _list_to_numpy(name: str, value: object) -> NDArray[Any]:
    """``np.asarray`` with numpy's ragged/None/string failures turned into one ValueError."""
    if value is None or isinstance(value, str | bytes):
        raise ValueError(f"{name}: expected an array, got {_describe(value)}")
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name}: not a rectangular array of numbers (ragged rows or mixed types)"
        ) from None
    if arr.dtype == object:
        raise ValueError(f"{name}: not a rectangular array of numbers (ragged rows or mixed types)")
    return arr


def _describe(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _ndims_text(ndims: Sequence[int]) -> str:
    shapes = {0: "a scalar", 1: "a vector", 2: "a 2-D array", 3: "a 3-D array"}
    return " or ".join(shapes.get(d, f"a {d}-D array") for d in ndims)
