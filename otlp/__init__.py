"""otlp — optimal-transport LPs for multi-draft speculative sampling.

Build problems from (p, q, n, k), solve them with interchangeable backends, turn solutions
into verification rules a decoder can sample from, and verify every answer.
"""

from otlp import global_resolution, limits  # global_resolution registers its method
from otlp.api import VerificationError, VerificationWarning, solve
from otlp.apidoc import methods_section
from otlp.errors import ProblemTooLarge
from otlp.instance import SCHEMES, Instance
from otlp.methods import describe_methods, method_names
from otlp.plan import TransportPlan
from otlp.subset import SubsetSelection, optimal_acceptance, psi
from otlp.verification import DraftVerification, verify_drafts
from otlp.verify import Tolerances, VerificationReport, verify

__all__ = [
    "SCHEMES",
    "DraftVerification",
    "Instance",
    "ProblemTooLarge",
    "SubsetSelection",
    "Tolerances",
    "TransportPlan",
    "VerificationError",
    "VerificationReport",
    "VerificationWarning",
    "describe_methods",
    "global_resolution",
    "limits",
    "method_names",
    "optimal_acceptance",
    "psi",
    "solve",
    "verify",
    "verify_drafts",
]
__version__ = "0.1.0"

# otlp.solve's docstring lists the registered methods and their options (docs/api.md too).
solve.__doc__ = (solve.__doc__ or "").replace("    {methods}", methods_section(indent="    "))
