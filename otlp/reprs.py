"""Compact ``repr``s: sizes and a few scalars instead of whole arrays.

A plan, a benchmark outcome or a suite holds arrays of thousands of entries; printing one at a
prompt should show what it is, not its data. :func:`summarize` turns one value into a short
string (arrays and matrices become dtype and shape, long containers their length) and
:func:`compact_repr` builds ``Name(field=value, ...)`` from such summaries.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import scipy.sparse as sp

MAX_ITEMS = 4  # containers up to this length are shown item by item
MAX_TEXT = 60


def summarize(value: Any) -> str:
    """A short description of ``value`` for a repr."""
    if isinstance(value, np.ndarray):
        return f"array({value.dtype}, shape={value.shape})"
    if sp.issparse(value):
        return f"sparse({value.dtype}, shape={value.shape}, nnz={value.nnz})"
    if isinstance(value, float | np.floating):
        return f"{float(value):.6g}"
    if isinstance(value, str):
        return repr(value if len(value) <= MAX_TEXT else value[: MAX_TEXT - 1] + "…")
    if isinstance(value, Mapping):
        if len(value) <= MAX_ITEMS and all(_is_scalar(v) for v in value.values()):
            return "{" + ", ".join(f"{k!r}: {summarize(v)}" for k, v in value.items()) + "}"
        return f"dict({len(value)} keys)"
    if isinstance(value, list | tuple):
        if len(value) <= MAX_ITEMS and all(_is_scalar(v) for v in value):
            return repr(value)
        return f"{type(value).__name__}(len={len(value)})"
    text = repr(value)
    return text if len(text) <= MAX_TEXT else f"<{type(value).__name__}>"


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float | str | np.generic)


def compact_repr(obj: object, fields: Mapping[str, Any]) -> str:
    """``TypeName(name=summary, ...)`` for the given fields (None values are left out)."""
    shown = ", ".join(f"{name}={summarize(v)}" for name, v in fields.items() if v is not None)
    return f"{type(obj).__name__}({shown})"


def dataclass_repr(self: Any) -> str:
    """A drop-in ``__repr__`` for dataclasses: every repr field, arrays summarised."""
    fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.repr}
    return compact_repr(self, fields)


def plan_repr(plan: Any) -> str:
    """A transport plan: problem sizes, method, acceptance and verification status.

    Acceptance is shown when it is already known (verified, or computed before): a lazy plan
    (global resolution) is never materialised by printing it. The status comes from
    ``plan.status`` where the plan has one, else from the verification report.
    """
    inst = plan.instance
    known = plan.__dict__
    report = getattr(plan, "verification", None) or plan.info.get("verification")
    acceptance = known.get("acceptance", getattr(report, "acceptance", None))
    if acceptance is None and "explicit" in known:
        acceptance = plan.acceptance
    status = getattr(plan, "status", None)
    if status is None and report is not None:
        status = "verified" if report.ok else "verification_failed"
    columns = known.get("columns")
    explicit = known.get("explicit")
    return compact_repr(
        plan,
        {
            "method": plan.method,
            "V": inst.vocab_size,
            "n": inst.n,
            "scheme": inst.scheme,
            "k": inst.k,
            "tau": plan.info.get("tau"),
            "columns": None if columns is None else columns.count,
            "nnz": None if explicit is None else explicit.nnz,
            "acceptance": acceptance,
            "status": status or "unchecked",
        },
    )
