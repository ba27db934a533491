"""Deprecated alias (kept for one release): global resolution beyond i.i.d. drafts now lives
in :mod:`otlp.global_resolution.schemes`."""

from otlp.global_resolution.constants import PSI_TIE
from otlp.global_resolution.scheme_parts import chain_targets
from otlp.global_resolution.schemes import SCHEMES, SchemeGlobalResolution

__all__ = ["PSI_TIE", "SCHEMES", "SchemeGlobalResolution", "chain_targets"]
