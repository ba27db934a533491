"""Inner-product sketching ([Musco], first part): estimate <a, b> from small sketches built
independently for a and b with shared random coins.

Every sketcher is built once with ``(m, dim, rng, copies)`` and then offers
``sketch(a)`` and ``estimate(sketch_a, sketch_b)``. ``copies`` draws that many independent
sketchers at once (a leading axis on every random array), so Monte Carlo over the sketches'
randomness is one vectorised call; with ``copies=None`` estimates are plain floats.

* :class:`JL` — linear sketch Pi a with i.i.d. mean-0 variance-1 entries scaled by 1/sqrt(m),
  Gaussian or +-1 (AMS); Var <= 2/m ||a||^2 ||b||^2.
* :class:`CountSketch` — one hashed +-1 entry per column [Charikar, Chen, Farach-Colton].
* :class:`QJL` — one bit per entry of Pi a (plus ||a||), Pi b kept [Zandieh, Daliri, Han]:
  F = sqrt(pi/2)/m ||a|| <sign(Pi a), Pi b>, unbiased with Var <= (pi/2)/m ||a||^2 ||b||^2
  (< 1.6/m). The lecture prints sqrt(pi); ``constant="printed"`` keeps it to show the bias
  (a factor sqrt(2)).
* :class:`ThresholdSampling` — keep (i, a_i) if u_i <= m a_i^2 / ||a||^2 with shared u;
  F = sum over common indices of a_i b_i / p_i, p_i = min(1, m a_i^2/||a||^2, m b_i^2/||b||^2).
  E|S(a)| = sum_i min(1, m a_i^2/||a||^2) <= m (the lecture's theorem says = m).
* :class:`PrioritySampling` — keep the m smallest ranks u_i / a_i^2 and the (m+1)-th as the
  threshold tau; p_i = min(1, a_i^2 tau_a, b_i^2 tau_b); exactly m entries per sketch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otlp.args import as_generator, canonical_name, positive_int
from otlp.limits import check_size
from otlp.solvers.arrays import FloatArray

__all__ = [
    "JL",
    "METHODS",
    "QJL",
    "QJL_CONSTANTS",
    "CountSketch",
    "PrioritySampling",
    "QJLKey",
    "SampleSketch",
    "ThresholdSampling",
    "estimate_inner_products",
]
QJL_CONSTANTS = {"corrected": math.sqrt(math.pi / 2), "printed": math.sqrt(math.pi)}


def _vector(name: str, a: ArrayLike, dim: int | None = None) -> FloatArray:
    """``a`` as a finite real float64 vector (of length ``dim`` if given), or ``ValueError``.

    Refuses None, scalars, strings, ragged or nested input and complex numbers (whose
    imaginary part a float cast would silently drop).
    """
    if a is None or isinstance(a, str | bytes):
        raise ValueError(f"{name}: expected a vector of real numbers, got {a!r}")
    try:
        raw = np.asarray(a)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: not a vector of real numbers (ragged or mixed input)") from None
    if raw.dtype.kind not in "iuf":
        raise ValueError(f"{name}: expected real numbers, got dtype {raw.dtype}")
    arr = raw.astype(np.float64)
    if arr.ndim != 1 or arr.size == 0 or (dim is not None and arr.shape != (dim,)):
        length = "" if dim is None else f" of length {dim}"
        raise ValueError(f"{name}: expected a non-empty vector{length}, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or infinite entries")
    return arr


class _Sketcher:
    """Shared set-up: sketch size m, dimension, seeded randomness, independent copies.

    ``table`` says how many entries per copy the sketcher allocates (m * dim for the dense
    sketches, dim + m for the hashed and sampled ones: their random tables and a sketch);
    copies times that is checked against ``otlp.limits`` (``max_variables``) before anything
    is allocated.
    """

    table = "dim"

    def __init__(self, m: int, dim: int, rng: object = None, copies: int | None = None) -> None:
        self.m = positive_int("m", m)
        self.dim = positive_int("dim", dim)
        self.copies = None if copies is None else positive_int("copies", copies)
        per_copy = self.m * self.dim if self.table == "m*dim" else self.dim + self.m
        check_size(
            f"m, dim: a {type(self).__name__} sketch with m = {self.m}, dim = {self.dim} "
            f"and {self._count} copies",
            self._count * per_copy,
            advice="lower m, dim or copies",
        )
        self.rng = as_generator(rng)

    @property
    def _count(self) -> int:
        return 1 if self.copies is None else self.copies

    def _out(self, values: FloatArray) -> FloatArray | float:
        return float(values[0]) if self.copies is None else values


class _Linear(_Sketcher):
    """A linear sketch S: <a, b> is estimated by <S a, S b> (per copy)."""

    def estimate(self, sketch_a: FloatArray, sketch_b: FloatArray) -> FloatArray | float:
        return self._out(np.einsum("cm,cm->c", sketch_a, sketch_b))


class JL(_Linear):
    """Dense linear sketch; ``kind`` "gaussian" or "sign" (+-1 entries, AMS)."""

    table = "m*dim"

    def __init__(
        self,
        m: int,
        dim: int,
        rng: object = None,
        copies: int | None = None,
        kind: str = "gaussian",
    ) -> None:
        super().__init__(m, dim, rng, copies)
        kind = canonical_name(kind, "kind")
        shape = (self._count, self.m, self.dim)
        if kind == "gaussian":
            entries = self.rng.standard_normal(shape)
        elif kind == "sign":
            entries = self.rng.choice(np.array([-1.0, 1.0]), size=shape)
        else:
            raise ValueError(f"kind: expected 'gaussian' or 'sign', got {kind!r}")
        self.kind = kind
        self.matrix = entries / math.sqrt(self.m)

    def sketch(self, a: ArrayLike) -> FloatArray:
        return self.matrix @ _vector("a", a, self.dim)


class CountSketch(_Linear):
    """Each coordinate hashed to one of m buckets with a random sign (O(d) to apply)."""

    def __init__(self, m: int, dim: int, rng: object = None, copies: int | None = None) -> None:
        super().__init__(m, dim, rng, copies)
        self.buckets = self.rng.integers(0, self.m, size=(self._count, self.dim))
        self.signs = self.rng.choice(np.array([-1.0, 1.0]), size=(self._count, self.dim))

    def sketch(self, a: ArrayLike) -> FloatArray:
        arr = _vector("a", a, self.dim)
        flat = (self.buckets + self.m * np.arange(self._count)[:, None]).ravel()
        sums = np.bincount(flat, (self.signs * arr).ravel(), self._count * self.m)
        return sums.reshape(self._count, self.m).astype(np.float64)


@dataclass(frozen=True)
class QJLKey:
    """sign(Pi a) (one bit per entry) and ||a||."""

    signs: NDArray[np.int8]
    norm: float


class QJL(_Sketcher):
    """Quantised JL: the key side keeps signs, the query side the full Pi b."""

    table = "m*dim"

    def __init__(
        self,
        m: int,
        dim: int,
        rng: object = None,
        copies: int | None = None,
        constant: str = "corrected",
    ) -> None:
        super().__init__(m, dim, rng, copies)
        if constant not in QJL_CONSTANTS:
            raise ValueError(f"constant: expected one of {list(QJL_CONSTANTS)}, got {constant!r}")
        self.constant = constant
        self.matrix = self.rng.standard_normal((self._count, self.m, self.dim))

    def sketch(self, a: ArrayLike) -> QJLKey:
        arr = _vector("a", a, self.dim)
        signs = np.where(self.matrix @ arr >= 0, 1, -1).astype(np.int8)
        return QJLKey(signs, float(np.linalg.norm(arr)))

    def sketch_query(self, b: ArrayLike) -> FloatArray:
        return self.matrix @ _vector("b", b, self.dim)

    def estimate(self, sketch_a: QJLKey, sketch_b: FloatArray) -> FloatArray | float:
        scale = QJL_CONSTANTS[self.constant] / self.m * sketch_a.norm
        return self._out(scale * np.einsum("cm,cm->c", sketch_a.signs, sketch_b))


@dataclass(frozen=True)
class SampleSketch:
    """Kept entries (a mask over coordinates per copy, the values) and the inclusion scale:
    an entry is kept with probability min(1, a_i^2 * scale)."""

    kept: NDArray[np.bool_]
    values: FloatArray
    scale: FloatArray  # per copy

    @property
    def size(self) -> NDArray[np.int64]:
        return self.kept.sum(axis=-1)


class _Sampling(_Sketcher):
    def __init__(self, m: int, dim: int, rng: object = None, copies: int | None = None) -> None:
        super().__init__(m, dim, rng, copies)
        self.u = self.rng.random((self._count, self.dim))

    def estimate(self, sketch_a: SampleSketch, sketch_b: SampleSketch) -> FloatArray | float:
        common = sketch_a.kept & sketch_b.kept
        a, b = sketch_a.values, sketch_b.values
        with np.errstate(invalid="ignore"):  # 0 * inf off the common entries, masked below
            p = np.minimum(
                1.0,
                np.minimum(a * a * sketch_a.scale[:, None], b * b * sketch_b.scale[:, None]),
            )
        terms = np.where(common, a * b / np.where(common, p, 1.0), 0.0)
        return self._out(terms.sum(axis=1))


class ThresholdSampling(_Sampling):
    """Keep (i, a_i) when u_i <= m a_i^2 / ||a||^2 (shared u across vectors)."""

    def sketch(self, a: ArrayLike) -> SampleSketch:
        arr = _vector("a", a, self.dim)
        norm2 = float(arr @ arr)
        scale = self.m / norm2 if norm2 > 0 else 0.0
        kept = self.u <= arr * arr * scale
        kept &= arr != 0
        values = np.where(kept, arr, 0.0)
        return SampleSketch(kept, values, np.full(self._count, scale))

    def expected_size(self, a: ArrayLike) -> float:
        """E|S(a)| = sum_i min(1, m a_i^2 / ||a||^2); 0 for the zero vector (nothing kept)."""
        arr = _vector("a", a, self.dim)
        largest = float(np.abs(arr).max())
        if largest == 0.0:
            return 0.0
        unit = arr / largest  # ||a||^2 of entries near 1e200 would overflow
        return float(np.minimum(1.0, self.m * unit * unit / (unit @ unit)).sum())


class PrioritySampling(_Sampling):
    """Keep the m smallest ranks u_i / a_i^2; the (m+1)-th smallest rank is the threshold."""

    def sketch(self, a: ArrayLike) -> SampleSketch:
        arr = _vector("a", a, self.dim)
        with np.errstate(divide="ignore"):
            ranks = np.where(arr != 0, self.u / (arr * arr), np.inf)
        if self.m < self.dim:
            tau = np.partition(ranks, self.m, axis=1)[:, self.m]
        else:
            tau = np.full(self._count, np.inf)
        kept = (ranks < tau[:, None]) & np.isfinite(ranks)
        values = np.where(kept, arr, 0.0)
        return SampleSketch(kept, values, tau)


METHODS: dict[str, Callable[..., Any]] = {
    "jl_gaussian": lambda m, d, rng, copies: JL(m, d, rng, copies, "gaussian"),
    "jl_sign": lambda m, d, rng, copies: JL(m, d, rng, copies, "sign"),
    "countsketch": CountSketch,
    "qjl": QJL,
    "threshold": ThresholdSampling,
    "priority": PrioritySampling,
}


def estimate_inner_products(
    method: str, a: ArrayLike, b: ArrayLike, m: int, rng: object = None, copies: int = 1
) -> FloatArray:
    """``copies`` independent estimates of <a, b> by ``method`` (see :data:`METHODS`)."""
    name = canonical_name(method, "method")
    if name not in METHODS:
        raise ValueError(f"method: expected one of {list(METHODS)}, got {method!r}")
    a_arr = _vector("a", a)
    b_arr = _vector("b", b, a_arr.size)
    sketcher = METHODS[name](m, a_arr.size, rng, copies)
    if isinstance(sketcher, QJL):
        estimates = sketcher.estimate(sketcher.sketch(a_arr), sketcher.sketch_query(b_arr))
    else:
        estimates = sketcher.estimate(sketcher.sketch(a_arr), sketcher.sketch(b_arr))
    return np.atleast_1d(np.asarray(estimates, dtype=np.float64))
