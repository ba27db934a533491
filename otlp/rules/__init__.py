"""Verification rules: every rule in the seeds with its draft joint, exact acceptance, exact
output law and a vectorised sampler.

>>> import otlp, otlp.rules
>>> inst = otlp.Instance([0.5, 0.3, 0.2], [0.2, 0.3, 0.5], n=2)
>>> round(otlp.rules.get("rrs").acceptance(inst), 6)
0.76

``names()`` lists them; ``get(name, **options)`` returns one (options: ``method`` for
``ot``/``canonical``, ``kl_budget`` for ``mentored``); ``describe()`` maps names to a line.
"""

from __future__ import annotations

from typing import Any

from otlp.args import canonical_name
from otlp.rules.base import ExactJoint, Rule, RuleDraw
from otlp.rules.couplings import GumbelCoupling, WeightedMinHash
from otlp.rules.joints import DraftJoint
from otlp.rules.kseq import KSeq
from otlp.rules.mentored import MentoredDecoding
from otlp.rules.rrs import RecursiveRejection, RecursiveRejectionWithoutReplacement
from otlp.rules.single import SpeculativeSampling
from otlp.rules.spechub import SpecHub
from otlp.rules.transport import CanonicalDecomposition, OptimalTransport

_RULES: dict[str, type[Rule]] = {
    cls.name: cls
    for cls in (
        SpeculativeSampling,
        GumbelCoupling,
        WeightedMinHash,
        RecursiveRejection,
        RecursiveRejectionWithoutReplacement,
        KSeq,
        SpecHub,
        CanonicalDecomposition,
        OptimalTransport,
        MentoredDecoding,
    )
}


def names() -> list[str]:
    """Names of all rules, single-draft first, lossy last."""
    return list(_RULES)


def get(name: str, **options: Any) -> Rule:
    """A new verification rule object called ``name``, built with ``options``.

    Parameters
    ----------
    name : str
        One of :func:`names`: sps, gumbel, minhash, rrs, rrs_without_replacement, kseq,
        spechub, canonical, ot, mentored (docs/api.md lists them with their options); old
        spellings such as "rrs-without-replacement" are aliases.
    **options
        ``method`` (and further :func:`otlp.solve` options) for ``ot`` and ``canonical``,
        ``kl_budget`` for ``mentored``; the other rules take none.

    Returns
    -------
    Rule
        With its draft joint (``draw``), exact ``acceptance`` and ``output_distribution``,
        ``conditional`` law given the drafts and a vectorised ``sample``.

    Raises
    ------
    ValueError
        Unknown name or option.

    Examples
    --------
    >>> import otlp, otlp.rules
    >>> inst = otlp.Instance([0.5, 0.3, 0.2], [0.2, 0.3, 0.5], n=2)
    >>> round(otlp.rules.get("rrs").acceptance(inst), 6)
    0.76
    >>> rule = otlp.rules.get("mentored", kl_budget=0.05)
    >>> rule.lossless
    False
    """
    key = canonical_name(name, "name")
    if key not in _RULES:
        raise ValueError(f"name: unknown rule {name!r}; known: {', '.join(_RULES)}")
    return _RULES[key](**options)


def describe() -> dict[str, str]:
    """Rule name -> one-line description with its seed reference."""
    return {name: cls.description for name, cls in _RULES.items()}


__all__ = ["DraftJoint", "ExactJoint", "Rule", "RuleDraw", "describe", "get", "names"]
