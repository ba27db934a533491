"""Synthetic (target p, draft q) pairs over a vocabulary.

* :func:`dirichlet_pair` — independent Dirichlet vectors (a stress test, not LLM-like).
* :func:`zipf_llm_pair` — heavy-tailed, LLM-like next-token distributions: Zipf-like logits
  with noise, a temperature, and a draft whose logits mix the target's with its own.
* :func:`spechub_toy_pair` — the toy family of [SpecHub] Appendix E:
  p = softmax(u_p / T), q = softmax((lam * u_p + (1 - lam) * u_q) / T). The text says
  u ~ U(0, 1)^V (``logits="uniform"``); standard normal logits (``logits="normal"``, the
  default) are the reading that reproduces its Table 4 (benchmarks/bench_table4.py).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from otlp.args import positive_int
from otlp.solvers.arrays import FloatArray


def softmax(logits: FloatArray) -> FloatArray:
    """Numerically stable softmax in float64."""
    z = np.asarray(logits, dtype=np.float64)
    z = np.exp(z - z.max())
    return z / z.sum()


def dirichlet_pair(
    vocab: int, concentration: float = 1.0, seed: int = 0
) -> tuple[FloatArray, FloatArray]:
    """Two independent Dirichlet(concentration) vectors of length ``vocab``."""
    vocab = positive_int("vocab", vocab)
    if not concentration > 0:
        raise ValueError(f"concentration: must be positive, got {concentration}")
    rng = np.random.default_rng(seed)
    alpha = np.full(vocab, float(concentration))
    return rng.dirichlet(alpha), rng.dirichlet(alpha)


def zipf_logits(vocab: int, exponent: float, noise: float, rng: np.random.Generator) -> FloatArray:
    """Logits whose sorted softmax decays like a power law (rank^-exponent), plus noise."""
    ranks = rng.permutation(vocab) + 1.0
    return -exponent * np.log(ranks) + noise * rng.standard_normal(vocab)


def zipf_llm_pair(
    vocab: int,
    exponent: float = 1.1,
    temperature: float = 1.0,
    similarity: float = 0.8,
    noise: float = 1.0,
    seed: int = 0,
) -> tuple[FloatArray, FloatArray]:
    """An LLM-like (target, draft) pair.

    The target's logits are Zipf-like; the draft's are ``similarity * target + (1 -
    similarity) * own`` with its own Zipf-like logits, so similarity 1 gives q = p. Both use
    ``temperature``.
    """
    vocab = positive_int("vocab", vocab)
    if not 0.0 <= similarity <= 1.0:
        raise ValueError(f"similarity: must lie in [0, 1], got {similarity}")
    if not temperature > 0:
        raise ValueError(f"temperature: must be positive, got {temperature}")
    rng = np.random.default_rng(seed)
    target = zipf_logits(vocab, exponent, noise, rng)
    own = zipf_logits(vocab, exponent, noise, rng)
    draft = similarity * target + (1.0 - similarity) * own
    return softmax(target / temperature), softmax(draft / temperature)


TOY_LOGITS = ("normal", "uniform")


def spechub_toy_pair(
    vocab: int = 50,
    temperature: float = 0.5,
    similarity: float = 0.7,
    seed: int = 0,
    logits: str = "normal",
) -> tuple[FloatArray, FloatArray]:
    """[SpecHub] Appendix E: logits u_p, u_q, temperature T and similarity lambda.

    ``logits="normal"`` draws N(0, 1) logits (reproduces Table 4 within Monte Carlo error);
    ``"uniform"`` draws U(0, 1) as the appendix's text says (acceptances far above Table 4).
    """
    vocab = positive_int("vocab", vocab)
    if not temperature > 0:
        raise ValueError(f"temperature: must be positive, got {temperature}")
    if logits not in TOY_LOGITS:
        raise ValueError(f"logits: expected one of {TOY_LOGITS}, got {logits!r}")
    rng = np.random.default_rng(seed)
    draw = rng.standard_normal if logits == "normal" else rng.random
    u_p, u_q = draw(vocab), draw(vocab)
    mixed = similarity * u_p + (1.0 - similarity) * u_q
    return softmax(u_p / temperature), softmax(mixed / temperature)


GENERATORS: dict[str, Callable[..., tuple[FloatArray, FloatArray]]] = {
    "dirichlet": dirichlet_pair,
    "zipf": zipf_llm_pair,
    "spechub-toy": spechub_toy_pair,
}
