"""The backend table: every backend by name, in one module (the habit of cvxpy's
``reductions/solvers/defines.py``), instead of registration as a side effect of imports.

Backend modules import their solver library inside ``solve`` only, so loading this table
loads no solver library; :func:`available_backends` asks :func:`importlib.util.find_spec`
whether a library is installed, without importing it.
"""

from __future__ import annotations

from otlp.solvers.base import Backend
from otlp.solvers.cvxpy_backend import CvxpyLP
from otlp.solvers.highs_backend import HighsLP
from otlp.solvers.networkx_backend import NetworkxMaxFlow
from otlp.solvers.ortools_backend import OrToolsMaxFlow
from otlp.solvers.pot_backend import PotEmd

BUILTIN_BACKENDS: tuple[type[Backend], ...] = (
    HighsLP,
    CvxpyLP,
    OrToolsMaxFlow,
    NetworkxMaxFlow,
    PotEmd,
)
_TABLE: dict[str, type[Backend]] = {cls.name: cls for cls in BUILTIN_BACKENDS}


def register(cls: type[Backend]) -> type[Backend]:
    """Class decorator adding a further (e.g. third-party) backend under ``cls.name``; the
    built-in ones are listed in ``BUILTIN_BACKENDS``."""
    _TABLE[cls.name] = cls
    return cls


def backend_names() -> list[str]:
    """Names of all backends in the table, usable here or not."""
    return sorted(_TABLE)


def available_backends() -> list[str]:
    """Names of backends whose libraries are installed here (found, not imported)."""
    return [name for name in backend_names() if _TABLE[name]().available()]


def backend_class(name: str) -> type[Backend]:
    """The class listed as ``name``, whether or not its library is installed."""
    if name not in _TABLE:
        raise ValueError(f"backend: unknown {name!r}; known: {', '.join(sorted(_TABLE))}")
    return _TABLE[name]


def get_backend(name: str) -> Backend:
    """An instance of the backend called ``name``; ``ValueError`` if unknown or unavailable."""
    backend = backend_class(name)()
    if not backend.available():
        raise ValueError(
            f"backend: {name!r} needs {', '.join(backend.requires)}, which is not installed"
        )
    return backend
