"""The instance classes of the fuzz campaign: (p, q) generators for what broke solvers and
rules before (one-hot and near-one-hot laws, ties, subnormal and tiny masses, disjoint
supports, float16 / float32 rounding, ...). Their own module, below the case makers, so that
the referee's case generator (:mod:`otlp.referee.generate`) draws from them without importing
the campaign."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def dirichlet(rng: np.random.Generator, size: int, alpha: float = 1.0) -> np.ndarray:
    """A random law on ``size`` tokens, Dirichlet(alpha) (the campaign's base draw)."""
    out = rng.dirichlet(np.full(size, alpha))
    return out / out.sum()


def normalised(values: np.ndarray) -> np.ndarray:
    """``values`` scaled to sum to one."""
    return values / values.sum()


def _one_hot(size: int, at: int) -> np.ndarray:
    out = np.zeros(size)
    out[at] = 1.0
    return out


def _tiny_masses(rng: np.random.Generator, size: int, scale: float) -> np.ndarray:
    """A distribution with some entries of order ``scale`` (1e-300, or subnormal)."""
    base = dirichlet(rng, size)
    tiny = rng.random(size) < 0.5
    tiny[rng.integers(size)] = False  # keep one normal entry
    base[tiny] = scale * (1 + rng.random(int(tiny.sum())))
    return base / base.sum()


def _random(rng: np.random.Generator, v: int) -> tuple[np.ndarray, np.ndarray]:
    alpha = float(rng.choice([0.1, 0.5, 1.0, 5.0]))
    return dirichlet(rng, v, alpha), dirichlet(rng, v, alpha)


def _q_one_hot(rng: np.random.Generator, v: int) -> tuple[np.ndarray, np.ndarray]:
    return dirichlet(rng, v), _one_hot(v, int(rng.integers(v)))


def _p_one_hot(rng: np.random.Generator, v: int) -> tuple[np.ndarray, np.ndarray]:
    return _one_hot(v, int(rng.integers(v))), dirichlet(rng, v)


def _near_one_hot(rng: np.random.Generator, v: int) -> tuple[np.ndarray, np.ndarray]:
    eps = float(rng.choice([1e-12, 1e-16, 1e-20]))
    q = np.full(v, eps)
    q[int(rng.integers(v))] = 1.0
    return dirichlet(rng, v), normalised(q)


def _subnormal(rng: np.random.Generator, v: int) -> tuple[np.ndarray, np.ndarray]:
    p, q = _tiny_masses(rng, v, 1e-310), _tiny_masses(rng, v, 1e-310)
    return (q, p) if rng.random() < 0.5 else (p, q)


def _tiny(rng: np.random.Generator, v: int) -> tuple[np.ndarray, np.ndarray]:
    return _tiny_masses(rng, v, 1e-300), _tiny_masses(rng, v, 1e-200)


def _equal(rng: np.random.Generator, v: int) -> tuple[np.ndarray, np.ndarray]:
    p = dirichlet(rng, v, float(rng.choice([0.2, 1.0])))
    return p, p.copy()


def _disjoint(rng: np.random.Generator, v: int) -> tuple[np.ndarray, np.ndarray]:
    v = max(v, 2)
    cut = int(rng.integers(1, v))
    p, q = np.zeros(v), np.zeros(v)
    p[:cut] = dirichlet(rng, cut)
    q[cut:] = dirichlet(rng, v - cut)
    return p, q


def _ties(rng: np.random.Generator, v: int) -> tuple[np.ndarray, np.ndarray]:
    levels = rng.integers(1, 3, size=v).astype(float)
    return normalised(levels), normalised(rng.integers(1, 3, size=v).astype(float))


def _float32(rng: np.random.Generator, v: int) -> tuple[np.ndarray, np.ndarray]:
    p, q = _random(rng, v)
    return p.astype(np.float32), q.astype(np.float32)


def _float16(rng: np.random.Generator, v: int) -> tuple[np.ndarray, np.ndarray]:
    """A model's float16 softmax: entries rounded to float16 (sums off by up to eps/2)."""
    p, q = _random(rng, v)
    return p.astype(np.float16), q.astype(np.float16)


def _peaked(rng: np.random.Generator, v: int) -> tuple[np.ndarray, np.ndarray]:
    """A peaked draft: the rest spread unevenly over 1e-18 .. 1e-16, the top holds 1 - rest
    (summed as a complement, never as 1 - q(top) of a rounded top)."""
    q = 10.0 ** rng.uniform(-18, -16, size=v)
    top = int(rng.integers(v))
    q[top] = 0.0
    q[top] = 1.0 - q.sum()
    return dirichlet(rng, v, float(rng.choice([0.2, 1.0]))), q


def _subnormal_columns(rng: np.random.Generator, v: int) -> tuple[np.ndarray, np.ndarray]:
    """Tiny entries whose products (the column masses of n >= 2 drafts) are subnormal, next
    to 1e-12 entries, with p a small perturbation of q (the pattern of issue 17)."""
    q = dirichlet(rng, v)
    scale = float(rng.choice([1e-160, 1e-155, 1e-110, 1e-80, 2.2e-300]))
    kinds = rng.integers(0, 3, size=v)  # 0: normal, 1: 1e-12, 2: the tiny scale
    kinds[int(rng.integers(v))] = 0
    q[kinds == 1] = 2.23e-12 * (1 + 1e-9 * rng.random(int((kinds == 1).sum())))
    q[kinds == 2] = scale * (1 + rng.random(int((kinds == 2).sum())))
    q = q / q.sum()
    p = q * (1 + 1e-9 * rng.standard_normal(v))
    return (p / p.sum(), q) if rng.random() < 0.7 else (dirichlet(rng, v), q)


def _p_off_the_top_drafts(rng: np.random.Generator, v: int) -> tuple[np.ndarray, np.ndarray]:
    """p = 0 on q's most likely tokens (greedy's fixed tokens, and often every draft), one-hot
    elsewhere half the time (temperature 0; issue 27: greedy divided by p(T) = 0)."""
    q = dirichlet(rng, v)
    p = dirichlet(rng, v)
    top = np.argsort(-q, kind="stable")[: max(1, v // 2)]
    p[top] = 0.0
    if not p.sum() > 0 or rng.random() < 0.5:
        rest = np.setdiff1d(np.arange(v), top)
        p = _one_hot(v, int(rng.choice(rest)) if rest.size else 0)
    return normalised(p), q


def _underflowing_tuples(rng: np.random.Generator, v: int) -> tuple[np.ndarray, np.ndarray]:
    """Several draft tokens of probability 1e-200 .. 1e-160: a tuple of two or more of them
    has a mass below the smallest double (issue 27: maxflow_cs refused such drafts)."""
    q = dirichlet(rng, v)
    tiny = rng.random(v) < 0.6
    tiny[int(rng.integers(v))] = False
    q[tiny] = 10.0 ** rng.uniform(-200, -160, size=int(tiny.sum()))
    return dirichlet(rng, v), normalised(q)


def _split_supports(rng: np.random.Generator, v: int) -> tuple[np.ndarray, np.ndarray]:
    """A draft on part of the vocabulary only: with the next draw of the class, two
    independent drafters of different supports (a token only the second can produce)."""
    q = dirichlet(rng, v)
    q[rng.random(v) < 0.5] = 0.0
    if not q.sum() > 0:
        q[int(rng.integers(v))] = 1.0
    return dirichlet(rng, v), normalised(q)


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
    "float16": _float16,
    "q_peaked": _peaked,
    "subnormal_columns": _subnormal_columns,
    "p_off_the_top_drafts": _p_off_the_top_drafts,
    "underflowing_tuples": _underflowing_tuples,
    "split_supports": _split_supports,
}
