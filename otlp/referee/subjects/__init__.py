"""Subjects from the field: the verification samplers that inference engines ship, written in
this project from the published algorithms, for the referee to judge.

:data:`SUBJECTS` maps a name to a :class:`Subject`: the sampler, its protocol (``"position"``:
``sampler(p, q, drafts, rng) -> int``; ``"tree"``: ``sampler(tokens, parents, p, q, rng) ->
(nodes, bonus)`` on one row of :func:`otlp.decoding.verify_tree`'s layout, see
:mod:`otlp.referee.subjects.common`), the draft scheme its drafts must be drawn under (an
:class:`otlp.Instance` scheme), whether it is expected lossless and where the algorithm comes
from.

>>> import numpy as np
>>> from otlp.referee.subjects import SUBJECTS
>>> subject = SUBJECTS["specinfer"]
>>> subject.protocol, subject.scheme, subject.expected_lossless
('position', 'iid', True)
>>> p, q = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.3, 0.5])
>>> token = subject.sampler(p, q, np.array([2, 0]), np.random.default_rng(0))
>>> token in (0, 1, 2)
True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from otlp.referee.generate import TREE_SHAPES, check_shapes
from otlp.referee.subjects.block import block_verification_tree
from otlp.referee.subjects.hsd import eagle3_hsd_tree
from otlp.referee.subjects.rejection import (
    sequoia,
    sequoia_tree,
    single_chain_tree,
    single_draft,
    specinfer,
    specinfer_tree,
)
from otlp.referee.subjects.suspects import (
    sibling_ratio_no_residual,
    sibling_ratio_no_residual_tree,
    top_n_id_sorted_residual,
    top_n_id_sorted_residual_tree,
    trtllm_dynamic_tree,
)
from otlp.referee.subjects.synthetic import vllm_synthetic, vllm_synthetic_chain_tree
from otlp.referee.subjects.target_only import (
    eagle_target_only,
    eagle_target_only_tree,
    sglang_target_only,
    sglang_target_only_relaxed,
    sglang_target_only_relaxed_tree,
    sglang_target_only_tree,
    sglang_target_only_tree_iid,
    target_only,
    target_only_tree,
)
from otlp.referee.subjects.typical import (
    medusa_typical_tree,
    typical_acceptance,
    typical_acceptance_chain_tree,
)

PROTOCOLS = ("position", "tree")


@dataclass(frozen=True)
class Subject:
    """A sampler from the field and what the referee needs to know to judge it.

    ``max_children``: the most drafts per position (position) or children per node (tree) the
    sampler reads; 1 = the first draft / the chain of first children (it ignores the rest),
    None = all. ``shapes``: the tree shapes the referee searches for it (names of
    :data:`otlp.referee.generate.TREE_SHAPES`), None = the referee's default.
    """

    name: str
    sampler: Callable[..., Any]
    protocol: str
    scheme: str
    expected_lossless: bool
    source: str
    max_children: int | None = None
    shapes: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol: expected one of {PROTOCOLS}, got {self.protocol!r}")
        if self.shapes is not None:
            check_shapes(self.shapes)


_SPECINFER = (
    "SpecInfer (Miao et al. 2024), multi-step speculative sampling; llama.cpp examples/speculative"
)
_SEQUOIA = "Sequoia (Chen et al. 2024), sampling without replacement; [SpecHub] §3.3"
_CHAIN = (
    "Leviathan et al. 2023, Algorithm 1; vLLM rejection sampler, FlashInfer "
    "chain_speculative_sampling, transformers assisted generation"
)
_TARGET = "EAGLE (Li et al. 2024); SGLang tree verification with sampling"
_SGLANG = "SGLang tree_speculative_sampling_target_only (one coin per level, thresholds 1)"
_SGLANG_RELAXED = (
    "SGLang tree_speculative_sampling_target_only with speculative_accept_threshold_single 0.9, "
    "_acc 0.7 (below the default 1)"
)
_EAGLE = "EAGLE (Li et al. 2024) reference code: recursive rejection with q = 1 at the draft"
_TYPICAL = "Medusa (Cai et al. 2024) typical acceptance; vLLM TypicalAcceptanceSampler"
_BLOCK = "Block verification (Sun et al., ICLR 2025); [GBV] §2.1"
_SUSPECT_A = "a stored TensorRT-LLM tree rejection sampling kernel (issue 26): no residual update"
_SUSPECT_B = "llama.cpp examples/speculative residual from id-sorted top-N lists (issue 26)"
_TRTLLM_DYNAMIC = (
    "TensorRT-LLM verifyDynamicTreeRejectionKernel as stored (dynamicTreeKernels.cu): siblings "
    "against the same target row, one residual; its unit test's fixture gives TV 0.557"
)
_SYNTHETIC = (
    "vLLM rejection_sample_method='synthetic' (synthetic_acceptance_rates 0.7, 0.5, 0.4): "
    "accepts by schedule, whatever p"
)
_MEDUSA_TREE = (
    "Medusa (Cai et al. 2024) evaluate_posterior, typical sampling, fast=True, on its tree"
)
_EAGLE3_HSD = (
    "HSD (Zhou et al., ICLR 2026, arXiv 2601.05724) in EAGLE-3, as its public code runs it: "
    "EAGLE-3H/eagle/model/utils.py evaluate_posterior(hsd=True), path after path"
)

SUBJECTS: dict[str, Subject] = {
    s.name: s
    for s in (
        Subject("target_only", target_only, "position", "iid", True, _TARGET),
        Subject("target_only_tree", target_only_tree, "tree", "iid", True, _TARGET),
        Subject("eagle_target_only", eagle_target_only, "position", "iid", True, _EAGLE),
        Subject("eagle_target_only_tree", eagle_target_only_tree, "tree", "iid", True, _EAGLE),
        Subject(
            "sglang_target_only",
            sglang_target_only,
            "position",
            "without_replacement",
            True,
            _SGLANG,
        ),
        Subject(
            "sglang_target_only_tree",
            sglang_target_only_tree,
            "tree",
            "without_replacement",
            True,
            _SGLANG,
        ),
        Subject(
            "sglang_target_only_tree_iid",
            sglang_target_only_tree_iid,
            "tree",
            "iid",
            False,
            _SGLANG,
        ),
        Subject(
            "sglang_target_only_relaxed",
            sglang_target_only_relaxed,
            "position",
            "without_replacement",
            False,
            _SGLANG_RELAXED,
        ),
        Subject(
            "sglang_target_only_relaxed_tree",
            sglang_target_only_relaxed_tree,
            "tree",
            "without_replacement",
            False,
            _SGLANG_RELAXED,
        ),
        Subject("specinfer", specinfer, "position", "iid", True, _SPECINFER),
        Subject("specinfer_tree", specinfer_tree, "tree", "iid", True, _SPECINFER),
        Subject("sequoia", sequoia, "position", "without_replacement", True, _SEQUOIA),
        Subject("sequoia_tree", sequoia_tree, "tree", "without_replacement", True, _SEQUOIA),
        Subject("single_draft", single_draft, "position", "iid", True, _CHAIN, 1),
        Subject("single_chain_tree", single_chain_tree, "tree", "iid", True, _CHAIN, 1),
        Subject("block_verification_tree", block_verification_tree, "tree", "iid", True, _BLOCK, 1),
        Subject(
            "sibling_ratio_no_residual",
            sibling_ratio_no_residual,
            "position",
            "iid",
            False,
            _SUSPECT_A,
        ),
        Subject(
            "sibling_ratio_no_residual_tree",
            sibling_ratio_no_residual_tree,
            "tree",
            "iid",
            False,
            _SUSPECT_A,
        ),
        Subject(
            "top_n_id_sorted_residual",
            top_n_id_sorted_residual,
            "position",
            "iid",
            False,
            _SUSPECT_B,
        ),
        Subject(
            "top_n_id_sorted_residual_tree",
            top_n_id_sorted_residual_tree,
            "tree",
            "iid",
            False,
            _SUSPECT_B,
        ),
        Subject(
            "trtllm_dynamic_tree",
            trtllm_dynamic_tree,
            "tree",
            "without_replacement",
            False,
            _TRTLLM_DYNAMIC,
        ),
        Subject("vllm_synthetic", vllm_synthetic, "position", "iid", False, _SYNTHETIC, 1),
        Subject(
            "vllm_synthetic_chain_tree",
            vllm_synthetic_chain_tree,
            "tree",
            "iid",
            False,
            _SYNTHETIC,
            1,
        ),
        Subject("typical_acceptance", typical_acceptance, "position", "iid", False, _TYPICAL, 1),
        Subject(
            "typical_acceptance_chain_tree",
            typical_acceptance_chain_tree,
            "tree",
            "iid",
            False,
            _TYPICAL,
            1,
        ),
        Subject(
            "medusa_typical_tree",
            medusa_typical_tree,
            "tree",
            "without_replacement",
            False,
            _MEDUSA_TREE,
        ),
        Subject(
            "eagle3_hsd_tree",
            eagle3_hsd_tree,
            "tree",
            "without_replacement",
            False,
            _EAGLE3_HSD,
            shapes=tuple(TREE_SHAPES),
        ),
    )
}

# The referee reads a bare sampler's own ``protocol`` and ``scheme`` attributes (``otlp
# referee otlp.referee.subjects.rejection:sequoia``): each function declares its own.
for _subject in SUBJECTS.values():
    setattr(_subject.sampler, "protocol", _subject.protocol)  # noqa: B010
    setattr(_subject.sampler, "scheme", _subject.scheme)  # noqa: B010
    if _subject.shapes is not None:
        setattr(_subject.sampler, "shapes", _subject.shapes)  # noqa: B010

__all__ = ["PROTOCOLS", "SUBJECTS", "Subject"]
