"""Instance generators and shipped instance suites."""

from otlp.instances.generators import GENERATORS, dirichlet_pair, spechub_toy_pair, zipf_llm_pair
from otlp.instances.suites import Suite, SuiteItem, load, register_suite, suite_names

__all__ = [
    "GENERATORS",
    "Suite",
    "SuiteItem",
    "dirichlet_pair",
    "load",
    "register_suite",
    "spechub_toy_pair",
    "suite_names",
    "zipf_llm_pair",
]
