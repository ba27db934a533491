"""Backend registry: look backends up by name, list the ones usable here."""

from __future__ import annotations

from solvers.base import Backend

_REGISTRY: dict[str, type[Backend]] = {}


def register(cls: type[Backend]) -> type[Backend]:
    """Class decorator adding a backend under ``cls.name``."""
    _REGISTRY[cls.name] = cls
    return cls


def _load_builtin() -> None:
    # Importing the modules registers their backends; each imports its library lazily.
    from solvers import (  # noqa: F401
        cvxpy_backend,
        highs_backend,
        networkx_backend,
        ortools_backend,
        pot_backend,
    )


def backend_names() -> list[str]:
    """Names of all registered backends, usable here or not."""
    _load_builtin()
    return sorted(_REGISTRY)


def available_backends() -> list[str]:
    """Names of backends whose libraries import here."""
    return [name for name in backend_names() if _REGISTRY[name]().available()]


def backend_class(name: str) -> type[Backend]:
    """The class registered as ``name``, whether or not its library is installed."""
    _load_builtin()
    if name not in _REGISTRY:
        raise ValueError(f"backend: unknown {name!r}; known: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def get_backend(name: str) -> Backend:
    """An instance of the backend called ``name``; ``ValueError`` if unknown or unavailable."""
    _load_builtin()
    if name not in _REGISTRY:
        raise ValueError(f"backend: unknown {name!r}; known: {', '.join(sorted(_REGISTRY))}")
    backend = _REGISTRY[name]()
    if not backend.available():
        raise ValueError(
            f"backend: {name!r} needs {', '.join(backend.requires)}, which is not installed"
        )
    return backend
