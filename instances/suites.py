"""Named instance suites: lists of (p, q) pairs with metadata, loadable by name.

A suite fixes the distributions; the grid of (n, top-k, scheme) to run them at is chosen by
whoever uses the suite (a benchmark config, a test).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from otlp.instances.generators import dirichlet_pair, spechub_toy_pair, zipf_llm_pair
from otlp.instances.realmodel.load import load_gemma3, load_smollm2
from otlp.reprs import dataclass_repr
from otlp.solvers.arrays import FloatArray

# Two independent drafts from one suite item: its draft and the same draft at this
# temperature (a second, more diverse drafter: q^(1/T) renormalised).
SECOND_DRAFT_TEMPERATURE = 1.5


@dataclass(frozen=True)
class SuiteItem:
    """One (target, draft) pair; ``meta`` says where it came from."""

    name: str
    p: FloatArray
    q: FloatArray
    meta: dict[str, Any] = field(default_factory=dict)

    __repr__ = dataclass_repr

    def draft(self, scheme: str) -> FloatArray:
        """The draft argument of ``otlp.Instance`` for ``scheme``: q, or for two independent
        drafts the (2, V) rows q and q at ``SECOND_DRAFT_TEMPERATURE``."""
        if scheme != "independent":
            return self.q
        with np.errstate(divide="ignore"):
            logits = np.log(self.q) / SECOND_DRAFT_TEMPERATURE
        second = np.exp(logits - logits.max())
        return np.stack([self.q, second / second.sum()])


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    items: tuple[SuiteItem, ...]

    __repr__ = dataclass_repr

    def __iter__(self) -> Iterator[SuiteItem]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


_SUITES: dict[str, tuple[Callable[[], Suite], str]] = {}


def register_suite(
    name: str, description: str
) -> Callable[[Callable[[], Suite]], Callable[[], Suite]]:
    """Decorator registering a zero-argument suite factory."""

    def wrap(factory: Callable[[], Suite]) -> Callable[[], Suite]:
        _SUITES[name] = (factory, description)
        return factory

    return wrap


def suite_names() -> dict[str, str]:
    """Suite name -> description."""
    return {name: desc for name, (_, desc) in _SUITES.items()}


def load(name: str) -> Suite:
    """The suite called ``name``."""
    if name not in _SUITES:
        raise ValueError(f"suite: unknown {name!r}; known: {', '.join(_SUITES)}")
    return _SUITES[name][0]()


@register_suite(
    "synthetic", "LLM-like Zipf pairs (V=4096) at two temperatures and three similarities"
)
def synthetic_suite() -> Suite:
    return _temperature_similarity_grid(
        "synthetic",
        "zipf",
        "zipf-T{t}-s{s}-{seed}",
        lambda t, s, seed: zipf_llm_pair(4096, temperature=t, similarity=s, seed=seed),
        temperatures=(1.0, 0.6),
        similarities=(0.5, 0.7, 0.9),
        seeds=2,
    )


def _decoder_vocabulary_suite(name: str, vocab: int) -> Suite:
    """LLM-sized vocabularies for end-to-end decoder timing: 3 similarities x 4 seeds, T = 1."""
    items = tuple(
        SuiteItem(
            f"zipf{vocab}-s{s}-{seed}",
            *zipf_llm_pair(vocab, similarity=s, seed=seed),
            {"vocab": vocab, "similarity": s, "seed": seed},
        )
        for seed, s in itertools.product(range(4), (0.5, 0.7, 0.9))
    )
    return Suite(name, f"LLM-like Zipf pairs at V={vocab:,} (decoder timing)", items)


@register_suite("zipf-32k", "LLM-like Zipf pairs, V=32,000 (Llama-2/Mistral vocabulary), 12 pairs")
def zipf_32k_suite() -> Suite:
    return _decoder_vocabulary_suite("zipf-32k", 32_000)


@register_suite("zipf-128k", "LLM-like Zipf pairs, V=128,256 (Llama-3 vocabulary), 12 pairs")
def zipf_128k_suite() -> Suite:
    return _decoder_vocabulary_suite("zipf-128k", 128_256)


@register_suite(
    "spechub-toy",
    "[SpecHub] Table 4 toy pairs (V=50, N(0,1) logits): T in {0.1, 0.25, 0.5} x lambda in "
    "{0.7, 0.5} x 100 pairs",
)
def spechub_toy_suite() -> Suite:
    return _temperature_similarity_grid(
        "spechub-toy",
        "spechub-toy",
        "toy-T{t}-l{s}-{seed}",
        lambda t, s, seed: spechub_toy_pair(50, t, s, seed),
        temperatures=(0.1, 0.25, 0.5),
        similarities=(0.7, 0.5),
        seeds=100,
    )


@register_suite(
    "spechub-toy-uniform",
    "[SpecHub] Appendix E read literally (V=50, U(0,1) logits), T in {0.1, 0.25, 0.5}",
)
def spechub_toy_uniform_suite() -> Suite:
    return _temperature_similarity_grid(
        "spechub-toy-uniform",
        "spechub-toy-uniform",
        "toy-uniform-T{t}-l{s}-{seed}",
        lambda t, s, seed: spechub_toy_pair(50, t, s, seed, logits="uniform"),
        temperatures=(0.1, 0.25, 0.5),
        similarities=(0.5, 0.7),
        seeds=3,
    )


def _temperature_similarity_grid(
    name: str,
    generator: str,
    label: str,
    make: Callable[[float, float, int], tuple[FloatArray, FloatArray]],
    temperatures: tuple[float, ...],
    similarities: tuple[float, ...],
    seeds: int,
) -> Suite:
    """One pair per (temperature, similarity, seed); ``label`` formats its name."""
    items = []
    for temperature, similarity, seed in itertools.product(
        temperatures, similarities, range(seeds)
    ):
        p, q = make(temperature, similarity, seed)
        meta = {
            "generator": generator,
            "temperature": temperature,
            "similarity": similarity,
            "seed": seed,
        }
        items.append(SuiteItem(label.format(t=temperature, s=similarity, seed=seed), p, q, meta))
    return Suite(name, suite_names()[name], tuple(items))


@register_suite("dirichlet", "Dirichlet(1) pairs, V=200 (not LLM-like; a stress test)")
def dirichlet_suite() -> Suite:
    items = tuple(
        SuiteItem(
            f"dirichlet-{seed}",
            *dirichlet_pair(200, 1.0, seed),
            meta={"generator": "dirichlet", "seed": seed},
        )
        for seed in range(6)
    )
    return Suite("dirichlet", suite_names()["dirichlet"], items)


def _model_suite(name: str, rows: list[dict[str, Any]]) -> Suite:
    """A suite of a real model's rows (``{"p", "q", "meta"}``, as the realmodel loaders return
    them), each named after the suite, its draft, temperature and index."""
    items = tuple(
        SuiteItem(
            f"{name}-{row['meta']['draft']}-T{row['meta']['temperature']}-{row['meta']['index']}",
            row["p"],
            row["q"],
            row["meta"],
        )
        for row in rows
    )
    return Suite(name, suite_names()[name], items)


@register_suite(
    "smollm2",
    "SmolLM2-135M next-token distributions: 12 prompts x 6 positions x 2 temperatures x 6 "
    "self-speculative drafts (layer skips, early exits); top-1000 slices (data card: "
    "instances/data/smollm2.md)",
)
def smollm2_suite() -> Suite:
    return _model_suite("smollm2", load_smollm2())


@register_suite(
    "gemma3",
    "Gemma 3 270M next-token distributions at V = 262,144: 12 prompts x 6 positions x 2 "
    "temperatures x 3 self-speculative drafts (layer skips, early exit); top-1000 slices (data "
    "card: instances/data/gemma3.md)",
)
def gemma3_suite() -> Suite:
    return _model_suite("gemma3", load_gemma3())
