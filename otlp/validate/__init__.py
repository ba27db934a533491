"""``otlp.validate``: every checkable statement of the papers as a named, seeded check.

>>> import otlp.validate
>>> report = otlp.validate.run(["gr.thm3_1"], count=5)
>>> report.ok
True

``checks()`` lists the registry; ``run(checks, count, seed, suite, quick)`` returns a
:class:`Report` (Markdown, JSON, per-statement worst margins and instances);
``replay(name, seed, index)`` re-runs one saved instance.
"""

from otlp.validate import checks as _checks  # noqa: F401  (registers every check)
from otlp.validate.registry import Case, Check, Outcome, checks, get
from otlp.validate.runner import CheckResult, Report, replay, run, select

__all__ = [
    "Case",
    "Check",
    "CheckResult",
    "Outcome",
    "Report",
    "checks",
    "get",
    "replay",
    "run",
    "select",
]
