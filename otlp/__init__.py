"""otlp — optimal-transport LPs for multi-draft speculative sampling.

Build problems from (p, q, n, k), solve them with interchangeable backends, turn solutions
into verification rules a decoder can sample from, and verify every answer.

The subpackages named in the README's table (``otlp.decoding``, ``otlp.instances``,
``otlp.multistep``, ``otlp.rules``, ``otlp.sketch``, ``otlp.solvers``, ``otlp.validate``,
``otlp.verification``) are attributes of
``otlp`` loaded on first access (PEP 562, as scipy loads its subpackages), so ``import otlp``
stays as fast as before.
"""

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

from otlp import global_resolution, limits, partial_resolution  # each registers its method
from otlp.api import VerificationError, VerificationWarning, solve
from otlp.apidoc import methods_section
from otlp.errors import ProblemTooLarge
from otlp.instance import SCHEMES, Instance
from otlp.methods import describe_methods, method_names
from otlp.plan import TransportPlan
from otlp.subset import SubsetSelection, optimal_acceptance, psi
from otlp.verification import (
    DraftVerification,
    TreeVerification,
    outcome_law,
    verify_chain,
    verify_drafts,
    verify_tree,
    warm_up,
)
from otlp.verify import Tolerances, VerificationReport, verify

if TYPE_CHECKING:
    from otlp import (
        decoding,
        instances,
        multistep,
        rules,
        sketch,
        solvers,
        validate,
        verification,
    )

SUBPACKAGES = (
    "decoding",
    "instances",
    "multistep",
    "rules",
    "sketch",
    "solvers",
    "validate",
    "verification",
)

__all__ = [
    "SCHEMES",
    "DraftVerification",
    "Instance",
    "ProblemTooLarge",
    "SubsetSelection",
    "Tolerances",
    "TransportPlan",
    "TreeVerification",
    "VerificationError",
    "VerificationReport",
    "VerificationWarning",
    "decoding",
    "describe_methods",
    "global_resolution",
    "instances",
    "limits",
    "method_names",
    "multistep",
    "optimal_acceptance",
    "outcome_law",
    "partial_resolution",
    "psi",
    "rules",
    "sketch",
    "solve",
    "solvers",
    "validate",
    "verification",
    "verify",
    "verify_chain",
    "verify_drafts",
    "verify_tree",
    "warm_up",
]
__version__ = "0.1.0"

# otlp.solve's docstring lists the registered methods and their options (docs/api.md too).
solve.__doc__ = (solve.__doc__ or "").replace("    {methods}", methods_section(indent="    "))


if not TYPE_CHECKING:  # type checkers see the imports above; a module __getattr__ would make
    # every misspelt attribute of otlp type-check as a module

    def __getattr__(name: str) -> ModuleType:
        """``otlp.sketch`` and the other :data:`SUBPACKAGES`, imported on first access (the
        import binds the attribute, so this runs once per subpackage)."""
        if name in SUBPACKAGES:
            return importlib.import_module(f"otlp.{name}")
        raise AttributeError(f"module 'otlp' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *SUBPACKAGES})
