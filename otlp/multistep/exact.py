"""Exact per-call laws of every multi-step method, by enumeration on small models.

``method`` is one of :data:`METHODS`:

* ``"token"`` — token-wise speculative sampling on one path ([GBV] Eq. 3);
* ``"block"`` — block verification on one path ([GBV] Eqs. 4–7);
* ``"gbv"`` — greedy multi-path block verification with K paths ([GBV] §5, Algorithm 1);
* ``"spectr"`` — tree traversal of K paths with a single-step verifier ([GR] App. R);
* ``"traversal"`` — Traversal Verification on one path (Weng et al., arXiv 2505.12398,
  :mod:`otlp.multistep.traversal`); trees: :func:`otlp.decoding.outcome_law`;
* ``"hsd"`` — Hierarchical Speculative Decoding on one path (Zhou et al., arXiv 2601.05724,
  :mod:`otlp.multistep.hsd`; its lossless, running-max-capped reading).

``target`` and ``draft`` map a prefix (tuple of token ids, after ``context``) to a next-token
probability vector; ``gamma`` is the draft block length L and ``paths`` the number K of
draft paths.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from otlp.args import positive_int
from otlp.limits import check_size, power
from otlp.multistep import hsd, single_path, traversal
from otlp.multistep.gbv import skewed_conditionals
from otlp.multistep.law import OutputLaw, single_path_law
from otlp.multistep.models import Model, prefix_digits
from otlp.multistep.spectr import traversal_law
from otlp.multistep.table import PrefixTable, check_table, tabulate
from otlp.multistep.verifiers import SingleStepVerifier, get_verifier
from otlp.solvers.arrays import FloatArray

METHODS = ("token", "block", "gbv", "spectr", "traversal", "hsd")
SINGLE_PATH = ("token", "block", "traversal", "hsd")


def output_law(
    target: Model | PrefixTable,
    draft: Model | PrefixTable,
    gamma: int,
    method: str,
    paths: int = 1,
    *,
    context: Sequence[int] = (),
    ranking: str = "ratio",
    rule: str | SingleStepVerifier = "ot",
    **rule_options: Any,
) -> OutputLaw:
    """The exact law of one call's output (accepted prefix + correction token).

    ``ranking`` is GBV's local key (:data:`otlp.multistep.gbv.RANKINGS`); ``rule`` is the
    single-step verifier of ``"spectr"`` (a name for :func:`get_verifier` or a callable),
    ``rule_options`` go to it.
    """
    tgt, dft = _tables(target, draft, gamma, method, paths, context)
    if method == "spectr":
        return traversal_law(tgt, dft, gamma, paths, get_verifier(rule, **rule_options))
    if method == "gbv":
        dft = skewed_table(tgt, dft, gamma, paths, ranking)
    kernel = {
        "token": single_path.tokenwise,
        "traversal": traversal.chain,
        "hsd": hsd.chain,
    }.get(method, single_path.block)
    tokens = _all_paths(tgt.vocab_size, gamma)
    stops = kernel(tgt.along_paths(tokens, gamma + 1), dft.along_paths(tokens, gamma), tokens)
    return single_path_law(stops, dft.joint(gamma), tgt.vocab_size)


def expected_accepted(
    target: Model | PrefixTable,
    draft: Model | PrefixTable,
    gamma: int,
    method: str,
    paths: int = 1,
    **options: Any,
) -> float:
    """Exact expected number of accepted draft tokens per target call (block efficiency - 1)."""
    return output_law(target, draft, gamma, method, paths, **options).expected_accepted


def output_distribution(
    target: Model | PrefixTable,
    draft: Model | PrefixTable,
    gamma: int,
    method: str,
    paths: int = 1,
    *,
    context: Sequence[int] = (),
    **options: Any,
) -> FloatArray:
    """Exact law of the first L + 1 tokens when the call's output is continued by the target
    (over V**(L+1) sequences, lexicographic); equals :func:`target_distribution` for a
    lossless method ([GBV] Definition 3.1, target-matching)."""
    tgt, dft = _tables(target, draft, gamma, method, paths, context)
    return output_law(tgt, dft, gamma, method, paths, **options).output_distribution(tgt)


def target_distribution(
    target: Model | PrefixTable, length: int, *, context: Sequence[int] = ()
) -> FloatArray:
    """M_b over all length-``length`` sequences (lexicographic)."""
    length = positive_int("length", length)
    return tabulate(target, length, context=context, name="target").joint(length)


def skewed_table(
    target: PrefixTable, draft: PrefixTable, gamma: int, paths: int, ranking: str = "ratio"
) -> PrefixTable:
    """GBV's skewed draft q~ as a table on all prefixes of length < L ([GBV] Eqs. 28–29)."""
    target, draft = check_table("target", target), check_table("draft", draft)
    gamma = positive_int("gamma", gamma)
    paths = positive_int("paths", paths)
    vocab = target.vocab_size
    tokens = _all_paths(vocab, gamma)
    conditionals, _ = skewed_conditionals(
        target.along_paths(tokens, gamma), draft.along_paths(tokens, gamma), tokens, paths, ranking
    )
    # The law after a length-d prefix is shared by its V**(L-d) paths: take the first of each.
    levels = tuple(conditionals[:: vocab ** (gamma - d), d] for d in range(gamma))
    return PrefixTable(levels)


def _tables(
    target: Model | PrefixTable,
    draft: Model | PrefixTable,
    gamma: int,
    method: str,
    paths: int,
    context: Sequence[int],
) -> tuple[PrefixTable, PrefixTable]:
    """Check the arguments; tabulate the target to depth L + 1 and the draft to depth L."""
    check_method(gamma, method, paths)
    tgt = tabulate(target, gamma + 1, context=context, name="target")
    dft = tabulate(draft, gamma, context=context, name="draft")
    if dft.vocab_size != tgt.vocab_size:
        raise ValueError(
            f"draft: vocabulary size {dft.vocab_size} differs from the target's {tgt.vocab_size}"
        )
    return tgt, dft


def check_method(gamma: int, method: str, paths: int) -> None:
    """``ValueError`` naming ``gamma``, ``method`` or ``paths`` if they do not fit together."""
    positive_int("gamma", gamma)
    positive_int("paths", paths)
    if method not in METHODS:
        raise ValueError(f"method: expected one of {METHODS}, got {method!r}")
    if method in SINGLE_PATH and paths != 1:
        raise ValueError(f"paths: method {method!r} verifies one path; use 'gbv' or 'spectr'")


def _all_paths(vocab: int, gamma: int) -> NDArray[np.int64]:
    check_size(
        "draft paths x positions x vocabulary",
        power(vocab, gamma) * (gamma + 1) * vocab,
        advice="lower the draft length or the vocabulary",
    )
    return prefix_digits(np.arange(vocab**gamma), vocab, gamma)
