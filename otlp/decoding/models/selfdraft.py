"""Self-speculative draft names: the decoder layers a draft runs, or prompt lookup.

A self-speculative draft is the target's own weights with fewer decoder layers ([GR] §7 drafts
by early exit; LayerSkip and Draft & Verify skip layers), or prompt lookup (no forward pass,
:mod:`~otlp.decoding.models.lookup`). Names:

* ``exitN`` — early exit: the first N layers, then the final norm and ``lm_head``;
* ``skip:i,j,...`` — every layer but those (0-based);
* ``skipN`` — a named skip set measured for one model (SmolLM2's ``skip1``, ``skip2``,
  ``skip4``, ``skip7``: :data:`otlp.instances.realmodel.generate.DRAFTS`);
* ``lookup`` / ``lookupN`` / ``lookupNwW`` — prompt lookup on n-grams up to N (default 3)
  with W candidate continuations (default 1; :func:`~otlp.decoding.models.lookup.lookup_spec`).

:func:`check_draft_name` checks the syntax alone (no model needed: a command line checks it
before loading anything); :func:`draft_layers` resolves a name against a model's layer count
and named sets.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from otlp.decoding.models.lookup import lookup_spec

DRAFT_NAMES = "exitN, skipN, skip:i,j,..., lookupN or lookupNwW"
_SYNTAX = re.compile(r"exit\d+|skip\d+|skip:\d+(?:,\d+)*|lookup\d*(?:w\d+)?")


def check_draft_name(spec: object) -> str:
    """``spec`` if it is a draft name of a valid form, else a ``ValueError`` naming ``draft``."""
    if not isinstance(spec, str) or not _SYNTAX.fullmatch(spec):
        raise ValueError(f"draft: expected {DRAFT_NAMES}, got {spec!r}")
    lookup_spec(spec)  # N >= 1 and W >= 1 for prompt lookup
    return spec


def draft_layers(
    spec: str, n_layers: int, presets: Mapping[str, Sequence[int]] | None = None
) -> list[int]:
    """The decoder layers (of ``n_layers``) the layer draft ``spec`` runs; ``presets`` maps
    the ``skipN`` names a model has to their skipped layers."""
    check_draft_name(spec)
    presets = presets or {}
    if match := re.fullmatch(r"exit(\d+)", spec):
        count = int(match.group(1))
        if not 1 <= count <= n_layers:
            raise ValueError(f"draft: {spec!r} needs 1 <= N <= {n_layers}")
        return list(range(count))
    if spec in presets:
        skip = set(presets[spec])
    elif match := re.fullmatch(r"skip:(\d+(?:,\d+)*)", spec):
        skip = {int(i) for i in match.group(1).split(",")}
        if max(skip) >= n_layers:
            raise ValueError(f"draft: {spec!r} names a layer beyond {n_layers - 1}")
    elif lookup_spec(spec) is not None:
        raise ValueError(f"draft: {spec!r} is prompt lookup, it runs no layers")
    else:
        known = (
            f"this model's named sets are {', '.join(sorted(presets))}"
            if presets
            else ("this model has no named skip sets; name the layers with skip:i,j,...")
        )
        raise ValueError(f"draft: unknown {spec!r}; {known}")
    layers = [i for i in range(n_layers) if i not in skip]
    if not layers:
        raise ValueError(f"draft: {spec!r} skips every layer")
    return layers


def check_draft(
    spec: str, n_layers: int, presets: Mapping[str, Sequence[int]] | None = None
) -> str:
    """``spec`` if it is a valid draft of a model with ``n_layers`` layers and ``presets``."""
    if lookup_spec(check_draft_name(spec)) is None:
        draft_layers(spec, n_layers, presets)
    return spec
