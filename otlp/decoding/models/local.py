"""A user's own model on disk: a ``transformers`` folder or a GGUF file, checked before loading.

A model is a folder written by ``save_pretrained`` (``config.json``, safetensors or ``.bin``
weights and the tokenizer's files) or a GGUF file (``transformers`` de-quantises it to
float32; it needs the ``gguf`` package). The tree adapter :class:`~otlp.decoding.models.hf.
HFTreeLM` runs Llama-style decoders, so only their architectures are accepted
(:data:`ARCHITECTURES`, each tested on a tiny random model).

Checks come in the order of their cost, each a ``ValueError`` naming the caller's flag:
:func:`check_model_path` (the path exists and looks like a model: milliseconds, no
dependency), :func:`inspect_model` (architecture and layer count from ``config.json`` or the
GGUF header: a second at most), then :func:`load_tokenizer` and :func:`load_model`. Loads are
cached per path and process.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# ``model_type`` (config.json) / ``general.architecture`` (GGUF) of the decoders HFTreeLM runs.
ARCHITECTURES = ("llama", "mistral", "qwen2", "qwen3")
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")
GGUF_MAGIC = b"GGUF"


@dataclass(frozen=True)
class ModelSource:
    """A model found on disk: its path, format (``"folder"`` or ``"gguf"``), architecture and
    number of decoder layers."""

    path: Path
    format: str
    architecture: str
    layers: int

    @property
    def name(self) -> str:
        """The folder's or file's name without suffix (a label for tables)."""
        return self.path.stem if self.format == "gguf" else self.path.name


def check_model_path(path: str | Path, flag: str = "model") -> Path:
    """``path`` resolved, if it is a folder with ``config.json`` or a file starting with the GGUF
    magic; else a ``ValueError`` naming ``flag``."""
    where = Path(path).expanduser()
    if not where.exists():
        raise ValueError(f"{flag}: no such file or folder {str(path)!r}")
    if where.is_dir():
        if not (where / "config.json").is_file():
            raise ValueError(
                f"{flag}: {where} is not a model folder (no config.json; save one with "
                "save_pretrained)"
            )
        return where.resolve()
    try:
        with where.open("rb") as handle:
            magic = handle.read(len(GGUF_MAGIC))
    except OSError as exc:
        raise ValueError(f"{flag}: cannot read {where}: {exc.strerror or exc}") from None
    if magic != GGUF_MAGIC:
        raise ValueError(f"{flag}: {where} is neither a model folder nor a GGUF file")
    return where.resolve()


def inspect_model(path: str | Path, flag: str = "model") -> ModelSource:
    """The :class:`ModelSource` at ``path``, with its architecture checked against
    :data:`ARCHITECTURES` (no weights are read)."""
    where = check_model_path(path, flag)
    architecture, layers = (_folder_header if where.is_dir() else _gguf_header)(where, flag)
    if layers < 1:
        raise ValueError(f"{flag}: {where.name} has no decoder layers")
    for kind, names in (("weights", WEIGHT_FILES), ("tokenizer", TOKENIZER_FILES)):
        if where.is_dir() and not any((where / name).is_file() for name in names):
            raise ValueError(f"{flag}: {where} has no {kind} ({', '.join(names)})")
    return ModelSource(where, "folder" if where.is_dir() else "gguf", architecture, layers)


def _check_architecture(architecture: str, where: Path, flag: str) -> str:
    if architecture not in ARCHITECTURES:
        raise ValueError(
            f"{flag}: {where.name} is a {architecture!r} model; the tree adapter runs "
            f"Llama-style decoders: {', '.join(ARCHITECTURES)}"
        )
    return architecture


def _folder_header(folder: Path, flag: str) -> tuple[str, int]:
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{flag}: cannot read {folder / 'config.json'}: {exc}") from None
    if not isinstance(config, dict) or not isinstance(config.get("model_type"), str):
        raise ValueError(f"{flag}: {folder / 'config.json'} has no model_type")
    architecture = _check_architecture(config["model_type"], folder, flag)
    layers = config.get("num_hidden_layers")
    if not isinstance(layers, int):
        raise ValueError(f"{flag}: {folder / 'config.json'} has no num_hidden_layers")
    return architecture, layers


def _gguf_header(file: Path, flag: str) -> tuple[str, int]:
    try:
        from gguf import GGUFReader
    except ImportError:
        raise ValueError(f"{flag}: a GGUF file needs the gguf package (llm extra)") from None
    try:
        reader = GGUFReader(file)
        architecture = _check_architecture(
            str(_gguf_field(reader, "general.architecture")), file, flag
        )
        layers = _gguf_field(reader, f"{architecture}.block_count")
    except (KeyError, ValueError, OSError) as exc:
        raise ValueError(f"{flag}: {file.name} is not a readable GGUF model ({exc})") from None
    return architecture, int(layers)


def _gguf_field(reader: Any, key: str) -> Any:
    field = reader.fields[key]
    value = field.parts[field.data[0]]
    return bytes(value).decode() if field.types[0].name == "STRING" else value[0]


def load_tokenizer(source: ModelSource, flag: str = "model") -> Any:
    """The tokenizer of ``source`` (``transformers.AutoTokenizer``), loaded once per process."""
    try:
        return _load(source, tokenizer=True)
    except ValueError as exc:
        raise ValueError(f"{flag}: {exc}") from None


def load_model(source: ModelSource, flag: str = "model") -> Any:
    """The causal LM of ``source`` in float32 and eval mode, loaded once per process."""
    try:
        return _load(source, tokenizer=False)
    except ValueError as exc:
        raise ValueError(f"{flag}: {exc}") from None


@functools.cache
def _load(source: ModelSource, *, tokenizer: bool) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local path never needs the hub
    try:
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise ValueError(f"{exc}; install the llm extra") from None
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    folder, extra = (
        (source.path.parent, {"gguf_file": source.path.name})
        if source.format == "gguf"
        else (source.path, {})
    )
    what = "tokenizer" if tokenizer else "weights"
    try:
        if tokenizer:
            return AutoTokenizer.from_pretrained(str(folder), **extra)
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32, **extra)
    except Exception as exc:  # whatever the file's reader raises: one line naming the flag
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"cannot load the {what} of {source.path}: {first}") from None
    return model.eval()
