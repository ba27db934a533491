"""Drafting the children of draft-tree nodes, separate from their verification.

A decoder drafts first, runs the target forward over the tree, and verifies after
(:func:`otlp.verification.verify_tree`). For every frontier node it has the draft law q at that
node's context and calls :func:`sample_children`. Schemes (:data:`SCHEMES`):

* ``"iid"`` — n i.i.d. draws from q (SpecTr, SpecInfer; the joint every i.i.d. rule verifies).
* ``"without_replacement"`` — n distinct tokens drawn sequentially from q (Gumbel-top-n),
  [SpecHub] §3.3 and Algorithm 1.
* ``"spechub"`` — SpecHub's hub joint for n = 2 ([SpecHub] §4): with a = argmax q (lowest id
  on ties), the pair (x, a) has probability q(x) and (a, x) has q(a) q(x) / (1 - q(a)) for
  x != a. The verifier recomputes a from the same q, so it needs no extra state; a node with
  one child drafts it from q.

``top_k`` restricts q to its k most likely tokens and renormalises it ([GR] Appendix N), with
ties at the boundary broken towards drafted tokens (:func:`restrict_top_k`), then lower ids: the
verifier applies the same restriction, so a draft is never outside it. A caller that restricts
with its own top-k passes that restricted law (zeros outside) and ``top_k=None``.

Randomness: ``rng`` is one ``numpy.random.Generator`` or seed for the whole call, or a
sequence with one per row (then a row's drafts do not depend on the other rows).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike

from otlp.args import as_generator, positive_int
from otlp.rules.joints import DraftJoint
from otlp.solvers.arrays import FloatArray, IntArray
from otlp.tensors import as_float64, as_index_array

SCHEMES = ("iid", "without_replacement", "spechub")
_JOINT_KIND = {"iid": "iid", "without_replacement": "without_replacement", "spechub": "hub"}
# The most children a node drafts, for the schemes that have a most: SpecHub's hub joint draws a
# pair ([SpecHub] §4).
MAX_CHILDREN = {"spechub": 2}


def check_scheme(scheme: object) -> str:
    """``scheme`` if it is one of :data:`SCHEMES`, else a ``ValueError`` naming it."""
    if scheme not in SCHEMES:
        raise ValueError(f"scheme: expected one of {', '.join(SCHEMES)}, got {scheme!r}")
    return str(scheme)


def row_generators(rng: object, rows: int) -> list[np.random.Generator] | np.random.Generator:
    """One generator per row from a sequence of seeds/generators (length ``rows``), or one
    shared generator from a seed, None or a Generator."""
    if isinstance(rng, Sequence | np.ndarray) and not isinstance(rng, str | bytes):
        items = list(rng)
        if len(items) != rows:
            raise ValueError(
                f"rng: expected one generator or seed per row ({rows}), got {len(items)}"
            )
        return [as_generator(item, f"rng[{b}]") for b, item in enumerate(items)]
    return as_generator(rng)


def row_uniforms(rng: object, rows: int, count: int) -> FloatArray:
    """``(rows, count)`` uniforms on [0, 1): row b's from its own generator when ``rng`` is a
    sequence (one per row) or a mapping {row: generator} (the seeded requests of an engine's
    batch, as vLLM passes them; rows without one draw from fresh entropy), else all from one
    generator in row order. A generator is a seed, a ``numpy.random.Generator`` or a
    ``torch.Generator`` (uniforms by ``torch.rand`` on its device, float64)."""
    if isinstance(rng, Mapping):
        unknown = [key for key in rng if not isinstance(key, int) or not 0 <= key < rows]
        if unknown:
            raise ValueError(f"rng: keys must be row indices in [0, {rows}), got {unknown[0]!r}")
        fresh = np.random.default_rng()
        return np.array(
            [
                _uniforms(rng[b], count, f"rng[{b}]") if b in rng else fresh.random(count)
                for b in range(rows)
            ]
        ).reshape(rows, count)
    if _is_torch_generator(rng) or not (
        isinstance(rng, Sequence | np.ndarray) and not isinstance(rng, str | bytes)
    ):
        return _uniforms(rng, rows * count, "rng").reshape(rows, count)
    items = list(rng)
    if len(items) != rows:
        raise ValueError(f"rng: expected one generator or seed per row ({rows}), got {len(items)}")
    return np.array([_uniforms(g, count, f"rng[{b}]") for b, g in enumerate(items)]).reshape(
        rows, count
    )


def _is_torch_generator(value: object) -> bool:
    return type(value).__module__.startswith("torch") and type(value).__name__ == "Generator"


def _uniforms(generator: object, count: int, name: str) -> FloatArray:
    """``count`` uniforms from a seed, numpy Generator or torch Generator."""
    if _is_torch_generator(generator):
        import torch

        device = generator.device  # type: ignore[attr-defined]
        draws = torch.rand(count, generator=generator, dtype=torch.float64, device=device)  # type: ignore[call-overload]
        return draws.cpu().numpy()
    return as_generator(generator, name).random(count)


def check_laws(ndims: Sequence[int], **laws: object) -> list[FloatArray]:
    """Each keyword argument as a float64 array with ``ndims`` dimensions, a non-empty last axis
    (the vocabulary) and finite nonnegative entries, all of one shape; a ``ValueError`` names
    the keyword (the caller passes its own parameters: ``check_laws((1,), p=p, q=q)``)."""
    out: list[FloatArray] = []
    for name, value in laws.items():
        arr, _ = as_float64(name, value, ndims=ndims)
        if arr.shape[-1] == 0:
            raise ValueError(f"{name}: expected at least one token per law, got shape {arr.shape}")
        bad = np.argwhere(~(np.isfinite(arr) & (arr >= 0)))
        if bad.size:
            where = tuple(int(i) for i in bad[0])
            raise ValueError(
                f"{name}[{', '.join(map(str, where))}]: expected a finite nonnegative "
                f"probability, got {arr[where]!r}"
            )
        if out and arr.shape != out[0].shape:
            first = next(iter(laws))
            raise ValueError(f"{name}: shape {arr.shape} differs from {first}'s {out[0].shape}")
        out.append(arr)
    return out


def check_top_k(top_k: object) -> int | None:
    """``top_k`` as a positive int, or None (no restriction); a ``ValueError`` names it."""
    return None if top_k is None else positive_int("top_k", top_k)


def restrict_top_k(q: ArrayLike, top_k: int | None, keep: ArrayLike | None = None) -> FloatArray:
    """Rows of ``q`` ``(M, V)`` restricted to their ``top_k`` largest entries and renormalised.

    Ties at the k-th value are broken towards the tokens listed in ``keep[m]`` (drafted
    tokens, ``(M, n)``; -1 entries ignored), then towards lower token ids; ``top_k=None``
    returns ``q``.
    """
    (arr,) = check_laws((2,), q=q)
    kept = None
    if keep is not None:
        kept, _ = as_index_array("keep", keep, ndims=(2,))
        if kept.shape[0] != arr.shape[0]:
            raise ValueError(
                f"keep: expected one row per row of q ({arr.shape[0]}), got {kept.shape}"
            )
    return _restrict_top_k(arr, check_top_k(top_k), kept)


def _restrict_top_k(q: FloatArray, top_k: int | None, keep: IntArray | None) -> FloatArray:
    if top_k is None or top_k >= q.shape[-1]:
        return q
    rows, vocab = q.shape
    out = np.zeros_like(q)
    for m in range(rows):
        row = q[m]
        kth = np.partition(row, vocab - top_k)[vocab - top_k]
        above = np.flatnonzero(row > kth)
        tied = np.flatnonzero(row == kth)
        if keep is not None and tied.shape[0] > top_k - above.shape[0]:
            wanted = np.isin(tied, keep[m][keep[m] >= 0])
            tied = np.concatenate([tied[wanted], tied[~wanted]])
        chosen = np.concatenate([above, tied[: top_k - above.shape[0]]])
        out[m, chosen] = row[chosen]
        total = out[m].sum()
        if total > 0:
            out[m] /= total
    return out


def sample_children(
    q: ArrayLike, n: int, scheme: str = "iid", rng: object = None, *, top_k: int | None = None
) -> IntArray:
    """Draft ``n`` children for each of M nodes from their draft laws ``q`` ``(M, V)``.

    Returns ``(M, n)`` token ids in draw order. ``q`` rows must be probability vectors (any
    float dtype; they are used in float64 and renormalised).
    """
    scheme = check_scheme(scheme)
    n = positive_int("n", n)
    (arr,) = check_laws((2,), q=q)
    totals = arr.sum(axis=1, keepdims=True)
    if np.any(totals <= 0):
        raise ValueError(f"q[{int(np.flatnonzero(totals[:, 0] <= 0)[0])}]: sums to 0")
    arr = _restrict_top_k(arr / totals, check_top_k(top_k), None)
    if n > MAX_CHILDREN.get(scheme, n):
        raise ValueError(f"n: SpecHub's hub joint drafts two children, got n={n}")
    gens = row_generators(rng, arr.shape[0])
    out = np.empty((arr.shape[0], n), dtype=np.int64)
    for m in range(arr.shape[0]):
        gen = gens if isinstance(gens, np.random.Generator) else gens[m]
        out[m] = _draft_one(arr[m], n, scheme, gen)
    return out


def _draft_one(q: FloatArray, n: int, scheme: str, rng: np.random.Generator) -> IntArray:
    if n == 1 or scheme == "iid":
        return _inverse_cdf(q, rng.random(n))
    if scheme == "without_replacement":
        support = np.count_nonzero(q)
        if support < n:
            raise ValueError(
                f"n: drawing {n} distinct drafts needs {n} tokens of positive draft "
                f"probability, q has {support}"
            )
    return draft_joint(q, n, scheme).sample(rng, 1)[0]


def _inverse_cdf(q: FloatArray, u: FloatArray) -> IntArray:
    cdf = np.cumsum(q)
    idx = np.searchsorted(cdf, u * cdf[-1], side="right")
    return np.minimum(idx, np.flatnonzero(q)[-1]).astype(np.int64)


def draft_joint(q: FloatArray, n: int, scheme: str) -> DraftJoint:
    """The draft joint of ``scheme`` over the whole vocabulary of ``q`` (for n children)."""
    scheme = check_scheme(scheme)  # refused for one child too
    kind = "iid" if n == 1 else _JOINT_KIND[scheme]
    return DraftJoint(kind, np.repeat(np.asarray(q, dtype=np.float64)[None, :], n, axis=0), n)


def children_probability(q: ArrayLike, omega: ArrayLike, scheme: str = "iid") -> float:
    """Probability that a node drafts the children ``omega`` (draw order) from ``q``."""
    local, (law,) = check_node(omega, q=q)
    return draft_joint(law, local.shape[0], scheme).tuple_mass(local)


def check_node(omega: object, **laws: object) -> tuple[IntArray, list[FloatArray]]:
    """A node's drafted children ``omega`` (token ids, 1-D int64) and its laws (keyword
    arguments, as :func:`check_laws` with one dimension); every ``ValueError`` names the
    caller's parameter (``omega`` or a law's keyword)."""
    checked = check_laws((1,), **laws)
    return as_index_array("omega", omega, ndims=(1,), size=checked[0].shape[0])[0], checked
