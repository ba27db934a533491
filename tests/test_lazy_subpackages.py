"""``import otlp`` gives every subpackage the README's table names as an attribute, loaded on
first access (PEP 562 ``__getattr__``/``__dir__``), listed in ``__all__`` and ``dir()``, known to
mypy, and not imported by ``import otlp`` itself (issue 27)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import otlp

ROOT = Path(__file__).resolve().parent.parent


def _fresh(code: str) -> str:
    """Run ``code`` in a new interpreter from the repository root; its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _readme_table_modules() -> set[str]:
    """``otlp.X`` entry points of the README's "What is inside" table that are subpackages."""
    text = (ROOT / "README.md").read_text()
    table = text[text.index("## What is inside") : text.index("## Headline results")]
    names = set(re.findall(r"`otlp\.([a-z_]+)", table))
    modules = {
        n for n in names if any((ROOT / "otlp").glob(f"{n}.py")) or (ROOT / "otlp" / n).is_dir()
    }
    return {n for n in modules if not callable(vars(otlp).get(n))}  # otlp.verify: a function


def test_the_readme_tables_subpackages_are_the_lazy_ones() -> None:
    named = _readme_table_modules()
    assert {"decoding", "multistep", "rules", "sketch", "validate"} <= named
    assert named <= set(otlp.SUBPACKAGES) | {"global_resolution", "limits"}  # eager ones


def test_import_otlp_loads_no_subpackage_itself_and_first_access_does() -> None:
    """``otlp/__init__`` imports no subpackage at run time (only for type checkers): the ones
    nothing else loads, sketch and validate, stay unloaded until first used."""
    init = ast.parse((ROOT / "otlp" / "__init__.py").read_text())
    runtime = [node for node in init.body if isinstance(node, ast.Import | ast.ImportFrom)]
    imported = {alias.name for node in runtime for alias in node.names}
    assert not imported & set(otlp.SUBPACKAGES)
    out = _fresh(
        "import sys, otlp\n"
        "print(sorted(n for n in ('sketch', 'validate') if 'otlp.' + n in sys.modules))\n"
        "f = otlp.sketch.estimate_inner_products\n"
        "estimates = f('jl_sign', [1.0, 2.0], [3.0, 4.0], 2, rng=0)\n"
        "print(otlp.sketch is sys.modules['otlp.sketch'], estimates.shape)\n"
        "print(sorted(n for n in ('sketch', 'validate') if 'otlp.' + n in sys.modules))\n"
    )
    before, used, after = out.splitlines()
    assert before == "[]"
    assert used == "True (1,)"
    assert after == "['sketch']"


@pytest.mark.parametrize("name", ["decoding", "multistep", "rules", "sketch", "validate"])
def test_each_subpackage_is_an_attribute_after_import_otlp(name: str) -> None:
    out = _fresh(f"import otlp\nprint(otlp.{name}.__name__, sorted(otlp.{name}.__all__)[:1])")
    assert out.startswith(f"otlp.{name} ")


def test_listed_in_all_and_dir_and_every_listed_name_resolves() -> None:
    for name in otlp.SUBPACKAGES:
        assert name in otlp.__all__ and name in dir(otlp)
    for name in otlp.__all__:
        assert getattr(otlp, name) is not None


def test_unknown_attributes_still_raise_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'otlp' has no attribute 'sketchs'"):
        otlp.sketchs  # type: ignore[attr-defined]  # noqa: B018
    assert not hasattr(otlp, "commands_")


def test_mypy_knows_the_subpackages_and_still_flags_misspellings(tmp_path: Path) -> None:
    """The subpackages are typed (TYPE_CHECKING imports); the runtime ``__getattr__`` is hidden
    from mypy, which would otherwise type every attribute of ``otlp`` as a module."""
    snippet = tmp_path / "use_otlp.py"
    snippet.write_text(
        "import otlp\n"
        "estimate = otlp.sketch.estimate_inner_products\n"
        "names: list[str] = otlp.rules.names()\n"
        "wrong: int = otlp.validate.run\n"
        "otlp.sketchs\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "mypy", str(snippet)], cwd=ROOT, capture_output=True, text=True
    )
    errors = [line for line in run.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 2, run.stdout
    assert "use_otlp.py:4:" in errors[0] and "Incompatible types" in errors[0]
    assert "use_otlp.py:5:" in errors[1] and '"sketchs"' in errors[1]


def test_the_decoders_calls_are_at_the_top_level() -> None:
    """One front door: the three decoder calls and the tree verifier's exact law are
    ``otlp.NAME``, the same objects as in :mod:`otlp.verification`."""
    from otlp import verification

    for name in ("verify_drafts", "verify_tree", "verify_chain", "outcome_law", "TreeVerification"):
        assert getattr(otlp, name) is getattr(verification, name)
        assert name in otlp.__all__
