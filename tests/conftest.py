"""Test-suite set-up: the hypothesis profile (``ci`` by default, derandomised; see
tests/profiles.py and docs/testing.md)."""

from tests import profiles

profiles.load()
