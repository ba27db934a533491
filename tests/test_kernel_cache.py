"""numba's kernel cache is cleared when any source of the package changes
(:mod:`otlp.solvers.kernel_cache`): a kernel calling a kernel of another module must not keep the
old callee's machine code."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from otlp.solvers.kernel_cache import STAMP, refresh


def _package(root: Path) -> Path:
    package = root / "pkg"
    (package / "__pycache__").mkdir(parents=True)
    (package / "a.py").write_text("X = 1\n")
    (package / "__pycache__" / "a.f-1.py311.nbi").write_text("index")
    (package / "__pycache__" / "a.f-1.py311.1.nbc").write_text("code")
    return package


def test_refresh_clears_the_cache_once_per_change(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    package = _package(tmp_path)
    assert refresh(package)  # no stamp yet: the cache of unknown sources goes
    assert not list((package / "__pycache__").glob("*.nb*"))
    assert (package / "__pycache__" / STAMP).is_file()
    (package / "__pycache__" / "a.f-1.py311.nbi").write_text("index")
    assert not refresh(package)  # same sources: kept
    assert (package / "__pycache__" / "a.f-1.py311.nbi").is_file()
    (package / "a.py").write_text("X = 22\n")  # another size: a change
    assert refresh(package)
    assert not list((package / "__pycache__").glob("*.nb*"))


def test_refresh_leaves_a_numba_cache_dir_alone(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "elsewhere"))
    package = _package(tmp_path)
    assert not refresh(package)
    assert (package / "__pycache__" / "a.f-1.py311.nbi").is_file()


CALLEE = "import numba\n\n@numba.njit(cache=True)\ndef value():\n    return {}\n"
CALLER = textwrap.dedent(
    """
    from pathlib import Path

    import numba

    from otlp.solvers.kernel_cache import refresh

    refresh(Path(__file__).parent)

    from kpkg.callee import value  # noqa: E402


    @numba.njit(cache=True)
    def twice():
        return 2 * value()
    """
)


@pytest.mark.slow
def test_a_caller_recompiles_after_its_callee_changes(tmp_path: Path) -> None:
    """The failure mode itself: numba alone would print 2 twice (the caller's cache, keyed
    by caller.py only, keeps the old callee)."""
    package = tmp_path / "kpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "callee.py").write_text(CALLEE.format(1))
    (package / "caller.py").write_text(CALLER)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(Path.cwd()), *sys.path])
    run = [sys.executable, "-c", "from kpkg.caller import twice; print(twice())"]
    first = subprocess.run(run, capture_output=True, text=True, env=env, check=True)
    assert first.stdout.strip() == "2"
    assert list((package / "__pycache__").glob("caller.*.nbi"))  # cached
    (package / "callee.py").write_text(CALLEE.format(21))
    second = subprocess.run(run, capture_output=True, text=True, env=env, check=True)
    assert second.stdout.strip() == "42"


def test_the_whole_solvers_package_is_stamped() -> None:
    """Kernels call each other across solvers' modules, not only within global resolution
    (partial resolution's row calls the gap filling of ``solvers/partial_resolution.py`` and
    global resolution's scan): the stamp covers every source of ``solvers/``. Before, only
    ``solvers/global_resolution/`` was stamped, and the row kept the old gap filling's code."""
    import otlp.solvers
    from otlp.solvers.kernel_cache import sources_stamp

    root = Path(otlp.solvers.__file__).parent
    stamp = root / "__pycache__" / STAMP
    if os.environ.get("NUMBA_CACHE_DIR") or not os.access(root, os.W_OK):
        pytest.skip("numba's own cache rules apply")
    assert stamp.is_file() and stamp.read_text() == sources_stamp(root)
