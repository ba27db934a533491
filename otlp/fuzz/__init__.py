"""A seeded fuzz harness: random and adversarial instances through every method, rule,
draft scheme and multi-step method, every conditional scanned (``otlp fuzz``).

>>> from otlp.fuzz import campaign_cases, run_campaign
>>> report = run_campaign(campaign_cases(seed=0, count=2), seed=0)
>>> report.cases
2
"""

from otlp.fuzz.cases import INSTANCE_CLASSES, make_case
from otlp.fuzz.checks import Outcome, components_for, run_case
from otlp.fuzz.runner import (
    FuzzReport,
    campaign_cases,
    load_replay,
    run_campaign,
    save_failures,
)

__all__ = [
    "INSTANCE_CLASSES",
    "FuzzReport",
    "Outcome",
    "campaign_cases",
    "components_for",
    "load_replay",
    "make_case",
    "run_campaign",
    "run_case",
    "save_failures",
]
