"""Hypothesis profiles of the test suite (registered and loaded by tests/conftest.py).

* ``ci`` (the default): derandomised — every run draws the same examples (seeded from each
  test), no example database, no deadline — so a test fails only when the code changes.
* ``explore`` (``HYPOTHESIS_PROFILE=explore python -m pytest ...``): random search with the
  local example database (a failure found is replayed first next time), and
  :data:`EXPLORE_FACTOR` times the examples on the guarantee-carrying properties.

A property carrying a promised guarantee (exact alpha*, tie rules, tolerances, slice sums)
asks for its example count with :func:`examples`.
"""

from __future__ import annotations

import os

from hypothesis import settings

PROFILES = ("ci", "explore")
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
EXPLORE_FACTOR = 5

settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True)
settings.register_profile("explore", derandomize=False, deadline=None, print_blob=True)


def load() -> None:
    """Load the profile named by ``HYPOTHESIS_PROFILE`` (default ``ci``)."""
    if PROFILE not in PROFILES:
        raise ValueError(f"HYPOTHESIS_PROFILE: expected one of {PROFILES}, got {PROFILE!r}")
    settings.load_profile(PROFILE)


def examples(count: int) -> int:
    """``count`` examples under ``ci``; ``EXPLORE_FACTOR`` times as many under ``explore``."""
    return count * EXPLORE_FACTOR if PROFILE == "explore" else count
