"""Seeded random and adversarial fuzz cases.

A case is a plain JSON-friendly dict, generated deterministically from ``(seed, index)``, so a
failure can be saved and replayed exactly. Two kinds:

* ``"instance"``: ``p``, ``q`` (one row, or n rows for independent drafts), ``n``, ``scheme``,
  ``top_k``, ``dtype`` — for every method, rule and draft scheme;
* ``"multistep"``: a small model pair (``model_pair`` arguments), block length, paths,
  method and single-step rule — for the multi-step methods.

Instance classes (:data:`INSTANCE_CLASSES`) cover what broke solvers and rules before: one-hot
p or q, near one-hot q (1 - 1e-12), subnormal and 1e-300 masses, p = q, disjoint supports,
ties, float32 input, tiny vocabularies, top-k, all three schemes, independent drafts and the
largest n the size limits allow on a tiny vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from otlp.instance import SCHEMES

Case = dict[str, Any]
MULTISTEP_SHARE = 0.15  # fraction of cases that are multi-step model pairs
MAX_V = 9
MAX_N_TINY_V = 6  # n up to this on V <= 3 ("extreme n within limits", each solve < 1 s)
# Many drafts on V <= 4: solved (set masses by dynamic programming) or refused by otlp.limits
HUGE_N = (8, 12, 16, 30, 100, 200, 10**6)


def _dirichlet(rng: np.random.Generator, size: int, alpha: float = 1.0) -> np.ndarray:
    out = rng.dirichlet(np.full(size, alpha))
    return out / out.sum()


def _normalised(values: np.ndarray) -> np.ndarray:
    return values / values.sum()


def _one_hot(size: int, at: int) -> np.ndarray:
    out = np.zeros(size)
    out[at] = 1.0
    return out


def _tiny_masses(rng: np.random.Generator, size: int, scale: float) -> np.ndarray:
    """A distribution with some entries of order ``scale`` (1e-300, or subnormal)."""
    base = _dirichlet(rng, size)
    tiny = rng.random(size) < 0.5
    tiny[rng.integers(size)] = False  # keep one normal entry
    base[tiny] = scale * (1 + rng.random(int(tiny.sum())))
    return base / base.sum()


def _random(rng: np.random.Generator, v: int) -> tuple[np.ndarray, np.ndarray]:
    alpha = float(rng.choice([0.1, 0.5, 1.0, 5.0]))
    return _dirichlet(rng, v, alpha), _dirichlet(rng, v, alpha)


def _q_one_hot(rng: np.random.Generator, v: int) -> tuple[np.ndarray, np.ndarray]:
    return _dirichlet(rng, v), _one_hot(v, int(rng.integers(v)))


def _p_one_hot(rng: np.random.Generator, v: int) -> tuple[np.ndarray, np.ndarray]:
    return _one_hot(v, int(rng.integers(v))), _dirichlet(rng, v)


def _near_one_hot(rng: np.random.Generator, v: int) -> tuple[np.ndarray, np.ndarray]:
    eps = float(rng.choice([1e-12, 1e-16, 1e-20]))
    q = np.full(v, eps)
    q[int(rng.integers(v))] = 1.0
    return _dirichlet(rng, v), _normalised(q)


def _subnormal(rng: np.random.Generator, v: int) -> tuple[np.ndarray, np.ndarray]:
    p, q = _tiny_masses(rng, v, 1e-310), _tiny_masses(rng, v, 1e-310)
    return (q, p) if rng.random() < 0.5 else (p, q)


def _tiny(rng: np.random.Generator, v: int) -> tuple[np.ndarray, np.ndarray]:
    return _tiny_masses(rng, v, 1e-300), _tiny_masses(rng, v, 1e-200)


def _equal(rng: np.random.Generator, v: int) -> tuple[np.ndarray, np.ndarray]:
    p = _dirichlet(rng, v, float(rng.choice([0.2, 1.0])))
    return p, p.copy()


def _disjoint(rng: np.random.Generator, v: int) -> tuple[np.ndarray, np.ndarray]:
    v = max(v, 2)
    cut = int(rng.integers(1, v))
    p, q = np.zeros(v), np.zeros(v)
    p[:cut] = _dirichlet(rng, cut)
    q[cut:] = _dirichlet(rng, v - cut)
    return p, q


def _ties(rng: np.random.Generator, v: int) -> tuple[np.ndarray, np.ndarray]:
    levels = rng.integers(1, 3, size=v).astype(float)
    return _normalised(levels), _normalised(rng.integers(1, 3, size=v).astype(float))


def _float32(rng: np.random.Generator, v: int) -> tuple[np.ndarray, np.ndarray]:
    p, q = _random(rng, v)
    return p.astype(np.float32), q.astype(np.float32)


INSTANCE_CLASSES: dict[str, Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]]]
INSTANCE_CLASSES = {
    "random": _random,
    "q_one_hot": _q_one_hot,
    "p_one_hot": _p_one_hot,
    "q_near_one_hot": _near_one_hot,
    "subnormal": _subnormal,
    "tiny_1e-300": _tiny,
    "p_equals_q": _equal,
    "disjoint": _disjoint,
    "ties": _ties,
    "float32": _float32,
}
SHAPES = ("small", "tiny_v", "extreme_n", "top_k", "huge_n")


def _as_list(values: np.ndarray) -> list[float]:
    return [float(x) for x in np.asarray(values, dtype=np.float64)]


def instance_case(rng: np.random.Generator, index: int) -> Case:
    """One instance case: a class of (p, q), a shape (V, n, top-k) and a scheme."""
    name = str(rng.choice(list(INSTANCE_CLASSES)))
    shape = str(rng.choice(SHAPES))
    v = {
        "small": int(rng.integers(2, MAX_V + 1)),
        "tiny_v": int(rng.integers(1, 3)),
        "extreme_n": int(rng.integers(2, 4)),
        "top_k": int(rng.integers(4, MAX_V + 1)),
        "huge_n": int(rng.integers(2, 5)),
    }[shape]
    if shape == "extreme_n":
        n = int(rng.integers(4, MAX_N_TINY_V + 1))
    elif shape == "huge_n":
        n = int(rng.choice(HUGE_N))
    else:
        n = int(rng.integers(1, 4))
    scheme = str(rng.choice(SCHEMES))
    p, q = INSTANCE_CLASSES[name](rng, v)
    v = len(p)
    rows: Any = _as_list(q)
    if scheme == "independent":
        n = min(n, 3)
        others = [INSTANCE_CLASSES[name](rng, v)[1] for _ in range(n - 1)]
        rows = [_as_list(q), *(_as_list(o) for o in others)]
    top_k = int(rng.integers(1, v + 1)) if shape == "top_k" or rng.random() < 0.2 else None
    if scheme == "without_replacement" and rng.random() < 0.9:  # mostly n <= draft support
        support = int(np.count_nonzero(np.asarray(q) > 0))
        n = max(1, min(n, support, top_k or support))
    return {
        "kind": "instance",
        "index": index,
        "class": name,
        "shape": shape,
        "p": _as_list(p),
        "q": rows,
        "n": n,
        "scheme": scheme,
        "top_k": top_k,
        "dtype": str(np.asarray(p).dtype),
    }


MULTISTEP_RULES = ("ot", "kseq", "rrs", "sps", "spechub")


def multistep_case(rng: np.random.Generator, index: int) -> Case:
    """One multi-step case: a small model pair, possibly adversarial (draft = pure noise,
    near one-hot laws, sparse laws), a block length, paths and a method."""
    method = str(rng.choice(["token", "block", "gbv", "spectr"]))
    paths = 1 if method in ("token", "block") else int(rng.integers(1, 3))
    return {
        "kind": "multistep",
        "index": index,
        "class": "multistep",
        "model": str(rng.choice(["context-free", "markov", "tree"])),
        "vocab": int(rng.integers(2, 4)),
        "seed": int(rng.integers(2**31)),
        "distance": float(rng.choice([0.0, 0.3, 0.7, 1.0])),
        "concentration": float(rng.choice([0.05, 0.5, 1.0, 5.0])),
        "sparsity": float(rng.choice([0.0, 0.0, 0.3, 0.6])),
        "gamma": int(rng.integers(1, 3)),
        "paths": paths,
        "method": method,
        "rule": str(rng.choice(MULTISTEP_RULES)) if method == "spectr" else None,
    }


def make_case(seed: int, index: int) -> Case:
    """Case ``index`` of the campaign seeded by ``seed`` (independent of the other cases)."""
    rng = np.random.default_rng([seed, index])
    if rng.random() < MULTISTEP_SHARE:
        return multistep_case(rng, index)
    return instance_case(rng, index)
