"""Keep numba's on-disk kernel cache consistent with the sources it was compiled from.

numba (``@njit(cache=True)``) keys a cached kernel by its own file's modification time and
size only. A kernel that calls a kernel of another module keeps the old callee's machine code
after that module changes: after a local edit or a ``git pull`` into an editable install, a
kernel of ``token.py`` would still run the ``softmax_system.py`` it was first compiled
against. :func:`refresh` stamps a package's sources (path, size, modification time of every
``.py`` file) and, when the stamp changed, deletes the package's cached kernels (``*.nbi``,
``*.nbc`` in its ``__pycache__`` folders) so that numba recompiles them all once.

Read-only installs and a ``NUMBA_CACHE_DIR`` elsewhere are left alone (numba's own rules then
apply); failures to read or write are ignored, never raised at import.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

STAMP = "numba-sources.stamp"
CACHE_SUFFIXES = (".nbi", ".nbc")


def sources_stamp(root: Path) -> str:
    """A digest of (relative path, size, mtime) of every ``.py`` file under ``root``."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        stat = path.stat()
        digest.update(f"{path.relative_to(root)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def cached_kernels(root: Path) -> list[Path]:
    """numba's cache files under ``root``'s ``__pycache__`` folders."""
    return [
        path
        for folder in root.rglob("__pycache__")
        for path in folder.iterdir()
        if path.suffix in CACHE_SUFFIXES
    ]


def refresh(root: Path) -> bool:
    """Delete ``root``'s cached kernels if its sources changed since the last stamp.

    Returns whether a stale cache was cleared. Does nothing (returns False) when
    ``NUMBA_CACHE_DIR`` is set or the folder cannot be read or written.
    """
    if os.environ.get("NUMBA_CACHE_DIR"):
        return False
    stamp_file = root / "__pycache__" / STAMP
    try:
        stamp = sources_stamp(root)
        if stamp_file.is_file() and stamp_file.read_text() == stamp:
            return False
        stale = cached_kernels(root)
        for path in stale:
            path.unlink(missing_ok=True)
        stamp_file.parent.mkdir(exist_ok=True)
        partial = stamp_file.with_name(f"{STAMP}.{os.getpid()}")
        partial.write_text(stamp)
        partial.replace(stamp_file)  # atomic: concurrent importers see one stamp or the other
    except OSError:
        return False
    return bool(stale)
