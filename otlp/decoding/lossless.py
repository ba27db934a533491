"""Is the decode loop lossless? A χ² test of the first two generated tokens, with a control.

:func:`check_lossless` decodes one prompt ``samples`` times (two new tokens each, one seed per
sample) with target and draft wrapped as memoised functions of prefixes (:func:`memoized`), so
that every context is evaluated once however often the draft trees revisit it. The empirical
joint law of the first two generated tokens (a, b) is tested against the target's own law
p(a) p(b | a), read from the same memo (:func:`chi_square`: every pair expected at least
:data:`MIN_EXPECTED` times is its own cell, the rest one lumped cell).

A test that never rejects proves nothing, so the same test is applied to a **negative
control**: ``samples`` pairs drawn from the draft's own law q(a) q(b | a). When the draft
differs from the target, the control must be rejected (a tiny p-value) while a lossless method
is not; :data:`REJECT_BELOW` is the p-value below which ``otlp decode --check-lossless`` calls a
row rejected.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from otlp.args import positive_int
from otlp.decoding.loop import Speculation, decode
from otlp.decoding.models.base import TreeModel
from otlp.decoding.models.prefix import Memoized, PrefixLM

MIN_EXPECTED = 5.0  # a pair expected this often is its own χ² cell
REJECT_BELOW = 1e-3  # a p-value below this is reported as a rejection

Pair = tuple[int, int]


@dataclass(frozen=True)
class ChiSquare:
    """One χ² test of ``samples`` pairs against p(a) p(b | a): its ``cells``, statistic,
    degrees of freedom and p-value, and the ``seconds`` spent drawing and testing the pairs
    (set by :func:`check_lossless`)."""

    samples: int
    cells: int
    chi2: float
    dof: int
    pvalue: float
    seconds: float = 0.0

    @property
    def rejected(self) -> bool:
        """Whether the pairs are unlikely under the target's law (p < :data:`REJECT_BELOW`)."""
        return self.pvalue < REJECT_BELOW

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "rejected": self.rejected}


@dataclass(frozen=True)
class LosslessCheck:
    """The test of a method's ``decoded`` pairs and of the draft-law negative ``control``."""

    decoded: ChiSquare
    control: ChiSquare

    def as_dict(self) -> dict[str, Any]:
        return {"decoded": self.decoded.as_dict(), "control": self.control.as_dict()}


def memoized(model: TreeModel) -> PrefixLM:
    """``model`` as a :class:`PrefixLM` over a :class:`Memoized` function of prefixes, at the
    same temperature: a :class:`PrefixLM` (the toy models, prompt lookup) keeps its function,
    a ``transformers`` model (:class:`otlp.decoding.models.hf.HFTreeLM`) is evaluated on
    whole prefixes (its ``prefix_laws``, already tempered). Any other model is refused."""
    if isinstance(model, PrefixLM):
        fn, temperature = model.fn, model.temperature
    elif callable(prefix_laws := getattr(model, "prefix_laws", None)):
        fn, temperature = prefix_laws, 1.0
    else:
        raise ValueError(f"model: {model!r} is neither a PrefixLM nor has prefix_laws")
    return PrefixLM(
        Memoized(fn), vocab_size=model.vocab_size, temperature=temperature, name=str(model.name)
    )


def check_lossless(
    target: PrefixLM,
    draft: PrefixLM,
    prompt: Sequence[int],
    speculation: Speculation,
    *,
    samples: int,
    batch: int = 64,
    seed: int = 0,
) -> LosslessCheck:
    """Decode ``prompt`` ``samples`` times with ``speculation`` (two new tokens, ``batch`` rows
    per decode call, sample i seeded with ``seed + i``) and test the pairs against the
    target's law; also test ``samples`` pairs drawn from the draft's own law (the negative
    control, its generator seeded by ``(seed, samples)``).

    ``target`` and ``draft`` should be memoised (:func:`memoized`): the test reads their laws
    at the prompt and after each likely first token. ``ValueError`` naming ``samples`` when the
    target's law is too concentrated for ``samples`` pairs to give two χ² cells."""
    samples = positive_int("samples", samples)
    batch = positive_int("batch", batch)
    prompt = [int(t) for t in prompt]
    seeds = list(range(seed, seed + samples))
    started = time.perf_counter()
    pairs: list[Pair] = []
    for start in range(0, samples, batch):
        rows = seeds[start : start + batch]
        out = decode(target, draft, [prompt] * len(rows), speculation, max_new_tokens=2, seed=rows)
        pairs.extend((t[0], t[1]) for t in out.tokens)
    decoded = replace(chi_square(pairs, target, prompt), seconds=time.perf_counter() - started)
    started = time.perf_counter()
    drawn = draw_pairs(draft, prompt, samples, np.random.default_rng((seed, samples)))
    control = replace(chi_square(drawn, target, prompt), seconds=time.perf_counter() - started)
    return LosslessCheck(decoded, control)


def draw_pairs(
    model: PrefixLM, prompt: Sequence[int], samples: int, rng: np.random.Generator
) -> list[Pair]:
    """``samples`` pairs a ~ m(a), b ~ m(b | a) from ``model``'s own law after ``prompt``."""
    prompt = list(prompt)
    firsts = rng.choice(model.vocab_size, size=samples, p=model.laws([prompt])[0])
    distinct = sorted({int(a) for a in firsts})
    seconds = dict(zip(distinct, model.laws([[*prompt, a] for a in distinct]), strict=True))
    return [(int(a), int(rng.choice(model.vocab_size, p=seconds[int(a)]))) for a in firsts]


def chi_square(pairs: Sequence[Pair], target: PrefixLM, prompt: Sequence[int]) -> ChiSquare:
    """χ² of ``pairs`` against the target's p(a) p(b | a) after ``prompt``: every pair expected
    at least :data:`MIN_EXPECTED` times is its own cell, the others one lumped cell (folded
    into the largest cell when it is expected fewer times). Only the laws after the prompt and
    after each first token a with n p(a) ≥ :data:`MIN_EXPECTED` are read (no rarer first token
    can start a cell)."""
    from scipy import stats

    n = len(pairs)
    prompt = list(prompt)
    first = target.laws([prompt])[0]
    likely = [int(a) for a in np.flatnonzero(first * n >= MIN_EXPECTED)]
    seconds = target.laws([[*prompt, a] for a in likely]) if likely else np.empty((0, 0))
    cells: list[Pair] = []
    wanted: list[float] = []
    for a, second in zip(likely, seconds, strict=True):
        expected = n * first[a] * second
        for b in np.flatnonzero(expected >= MIN_EXPECTED):
            cells.append((a, int(b)))
            wanted.append(float(expected[b]))
    counts = Counter(pairs)
    observed = [counts[c] for c in cells]
    observed.append(n - sum(observed))
    wanted.append(n - sum(wanted))
    if wanted[-1] < MIN_EXPECTED and len(wanted) > 1:  # lump too rare: fold into the largest
        big = int(np.argmax(wanted[:-1]))
        observed[big] += observed.pop()
        wanted[big] += wanted.pop()
    if len(observed) < 2:
        raise ValueError(
            f"samples: {n} pairs give {len(observed)} χ² cell (each expected at least "
            f"{MIN_EXPECTED:g} times); the target's law needs more samples"
        )
    expected_counts = np.array(wanted)
    chi2, pvalue = stats.chisquare(observed, expected_counts * n / expected_counts.sum())
    return ChiSquare(
        samples=n,
        cells=len(observed),
        chi2=float(chi2),
        dof=len(observed) - 1,
        pvalue=float(pvalue),
    )
