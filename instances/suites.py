"""Named instance suites: lists of (p, q) pairs with metadata, loadable by name.

A suite fixes the distributions; the grid of (n, top-k, scheme) to run them at is chosen by
whoever uses the suite (a benchmark config, a test).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from instances.generators import dirichlet_pair, spechub_toy_pair, zipf_llm_pair
from instances.realmodel.load import load_smollm2

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class SuiteItem:
    """One (target, draft) pair; ``meta`` says where it came from."""

    name: str
    p: FloatArray
    q: FloatArray
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    items: tuple[SuiteItem, ...]

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
    items = []
    for temperature in (1.0, 0.6):
        for similarity in (0.5, 0.7, 0.9):
            for seed in range(2):
                p, q = zipf_llm_pair(
                    4096, temperature=temperature, similarity=similarity, seed=seed
                )
                meta = {
                    "generator": "zipf",
                    "temperature": temperature,
                    "similarity": similarity,
                    "seed": seed,
                }
                items.append(SuiteItem(f"zipf-T{temperature}-s{similarity}-{seed}", p, q, meta))
    return Suite("synthetic", suite_names()["synthetic"], tuple(items))


@register_suite("spechub-toy", "seed 001 Appendix E toy pairs (V=50), T in {0.1, 0.25, 0.5}")
def spechub_toy_suite() -> Suite:
    items = []
    for temperature in (0.1, 0.25, 0.5):
        for similarity in (0.5, 0.7):
            for seed in range(3):
                p, q = spechub_toy_pair(50, temperature, similarity, seed)
                meta = {
                    "generator": "spechub-toy",
                    "temperature": temperature,
                    "similarity": similarity,
                    "seed": seed,
                }
                items.append(SuiteItem(f"toy-T{temperature}-l{similarity}-{seed}", p, q, meta))
    return Suite("spechub-toy", suite_names()["spechub-toy"], tuple(items))


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


@register_suite(
    "smollm2",
    "SmolLM2-135M next-token distributions: 12 prompts x 6 positions x 2 temperatures x 6 "
    "self-speculative drafts (layer skips, early exits); top-1000 slices (data card: "
    "instances/data/smollm2.md)",
)
def smollm2_suite() -> Suite:
    items = tuple(
        SuiteItem(
            f"smollm2-{row['meta']['draft']}-T{row['meta']['temperature']}-{row['meta']['index']}",
            row["p"],
            row["q"],
            row["meta"],
        )
        for row in load_smollm2()
    )
    return Suite("smollm2", suite_names()["smollm2"], items)
