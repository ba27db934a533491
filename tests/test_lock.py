"""The lock (constraints.txt) covers what the README's install commands install: every
requirement of the project and of every extra in pyproject.toml, pinned exactly, each pin inside
the range pyproject.toml declares, and every transitive dependency of those pins pinned too."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
NAME = canonicalize_name(PROJECT["name"])


def _lock(text: str) -> dict[str, Version]:
    """Name → pinned version of every ``name==version`` line; anything else is refused."""
    pins: dict[str, Version] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", line)
        assert match, f"constraints.txt:{number}: {raw!r} is not an exact pin"
        name = canonicalize_name(match[1])
        assert name not in pins, f"constraints.txt:{number}: {match[1]} pinned twice"
        pins[name] = Version(match[2])
    return pins


LOCK = _lock((ROOT / "constraints.txt").read_text())


def _requirements(extra: str | None) -> list[Requirement]:
    """The requirements an install of the project with ``extra`` asks for, the project's own
    extras (``otlp[llm]``) expanded."""
    declared = PROJECT["dependencies"] if extra is None else PROJECT["optional-dependencies"][extra]
    found: list[Requirement] = []
    for text in declared:
        requirement = Requirement(text)
        if canonicalize_name(requirement.name) == NAME:
            for inner in sorted(requirement.extras):
                found += _requirements(inner)
        else:
            found.append(requirement)
    return found


def _applies(requirement: Requirement, extra: str = "") -> bool:
    if requirement.marker is None:
        return True
    return requirement.marker.evaluate({**default_environment(), "extra": extra})


@pytest.mark.parametrize("extra", [None, *PROJECT["optional-dependencies"]])
def test_the_lock_pins_every_requirement_inside_its_declared_range(extra):
    for requirement in filter(_applies, _requirements(extra)):
        name = canonicalize_name(requirement.name)
        assert name in LOCK, f"{extra or 'dependencies'}: {requirement.name} is not in the lock"
        assert requirement.specifier.contains(LOCK[name], prereleases=True), (
            f"{extra or 'dependencies'}: the lock's {requirement.name}=={LOCK[name]} is outside "
            f"{requirement.specifier}"
        )


def test_the_lock_is_closed_under_dependencies():
    """Every dependency (with the extras asked for) of every locked package that is installed
    here is locked too: the lock is the whole environment, not just the top level."""
    missing: set[str] = set()
    todo = [(canonicalize_name(r.name), frozenset(r.extras)) for r in _requirements("test")]
    todo += [(canonicalize_name(r.name), frozenset(r.extras)) for r in _requirements("all")]
    todo += [(canonicalize_name(r.name), frozenset(r.extras)) for r in _requirements(None)]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        if name not in LOCK:
            missing.add(name)
            continue
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue  # locked but not installed here (another extra): its own pins are checked
        for text in requires:
            requirement = Requirement(text)
            if any(_applies(requirement, extra) for extra in ("", *extras)):
                todo.append((canonicalize_name(requirement.name), frozenset(requirement.extras)))
    assert not missing, f"not in the lock: {sorted(missing)}"


def test_the_lock_refuses_what_is_not_an_exact_pin():
    assert _lock("numpy==2.3.5  # a comment\n\n") == {"numpy": Version("2.3.5")}
    with pytest.raises(AssertionError, match="not an exact pin"):
        _lock("numpy>=2.0\n")
    with pytest.raises(AssertionError, match="pinned twice"):
        _lock("numpy==2.3.5\nNumPy==2.3.4\n")
