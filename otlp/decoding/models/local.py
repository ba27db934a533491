"""A user's own model on disk: a ``transformers`` folder or a GGUF file, checked before loading.

A model is a folder written by ``save_pretrained`` (``config.json``, safetensors or ``.bin``
weights and the tokenizer's files) or a GGUF file (``transformers`` de-quantises it to
float32; it needs the ``gguf`` package). The tree adapter :class:`~otlp.decoding.models.hf.
HFTreeLM` runs Llama-style decoders, so only their architectures are accepted
(:data:`ARCHITECTURES`, each tested on a tiny random model).

A GGUF file is de-quantised once: the float32 weights, config and tokenizer are kept in a
cache folder keyed by the file's SHA-256 (:func:`gguf_cache`: ``$OTLP_CACHE_DIR`` or
``~/.cache/otlp``, under ``gguf/``), and later processes load that folder instead.

Checks come in the order of their cost, each a ``ValueError`` naming the caller's flag:
:func:`check_model_path` (the path exists and looks like a model: milliseconds, no
dependency), :func:`inspect_model` (architecture and layer count from ``config.json`` or the
GGUF header: a second at most), then :func:`load_tokenizer` and :func:`load_model`. Loads are
cached per path and process.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import struct
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# ``model_type`` (config.json) / ``general.architecture`` (GGUF) of the decoders HFTreeLM runs.
# Gemma 3 is ``gemma3_text`` in a folder (``gemma3`` there is the vision-language model) and
# ``gemma3`` in a GGUF file (its text decoder only: transformers reads it as ``gemma3_text``).
ARCHITECTURES = ("llama", "mistral", "qwen2", "qwen3", "gemma3_text")
GGUF_ARCHITECTURES = ("llama", "mistral", "qwen2", "qwen3", "gemma3")
CACHE_ENV = "OTLP_CACHE_DIR"
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
    label: str = ""

    @property
    def name(self) -> str:
        """``label`` when given (an embedded model's name, e.g. ``gemma3``), else the folder's or
        file's name without suffix (a label for tables)."""
        if self.label:
            return self.label
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


def _check_architecture(
    architecture: str, where: Path, flag: str, accepted: tuple[str, ...] = ARCHITECTURES
) -> str:
    if architecture not in accepted:
        hint = (
            " (this is Gemma 3's vision-language model: save its text model, gemma3_text)"
            if architecture == "gemma3"
            else ""
        )
        raise ValueError(
            f"{flag}: {where.name} is a {architecture!r} model{hint}; the tree adapter runs "
            f"Llama-style decoders and Gemma 3: {', '.join(accepted)}"
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
        fields = read_gguf_fields(file, ("general.architecture",))
        architecture = str(fields["general.architecture"])
    except (KeyError, ValueError, OSError, UnicodeDecodeError, struct.error) as exc:
        raise ValueError(f"{flag}: {file.name} is not a readable GGUF model ({exc})") from None
    _check_architecture(architecture, file, flag, GGUF_ARCHITECTURES)  # the reason, once
    key = f"{architecture}.block_count"
    try:
        layers = read_gguf_fields(file, (key,))[key]
    except (KeyError, ValueError, OSError, UnicodeDecodeError, struct.error) as exc:
        raise ValueError(f"{flag}: {file.name} has no {key} ({exc})") from None
    return architecture, int(layers)


# GGUF value types (ggml's gguf.h, GGUF v2/v3): scalar struct formats, 8 = string, 9 = array.
_GGUF_SCALARS = {
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q",
    12: "<d",
}  # fmt: skip


def read_gguf_fields(file: Path, keys: Sequence[str]) -> dict[str, Any]:
    """The metadata ``keys`` of a GGUF file (v2/v3: scalars, strings, arrays as lists), read
    from its header until all are found; a ``KeyError`` names a key the header lacks. Arrays not
    asked for are skipped without being built, so this takes milliseconds where
    ``gguf.GGUFReader`` parses every field (18 s for Gemma 3's 262,144-token vocabulary on this
    machine); Gemma 3's ``tokenizer.ggml.tokens``, asked for, takes 0.1 s."""
    wanted, found = set(keys), {}
    with file.open("rb") as handle:

        def read(fmt: str) -> Any:
            size = struct.calcsize(fmt)
            data = handle.read(size)
            if len(data) != size:
                raise ValueError("the header ends early")
            return struct.unpack(fmt, data)[0]

        def string() -> str:
            size = read("<Q")
            data = handle.read(size)
            if len(data) != size:
                raise ValueError("the header ends early")
            return data.decode()

        def value(kind: int) -> Any:
            if kind == 8:
                return string()
            if kind == 9:
                item, count = read("<I"), read("<Q")
                return [value(item) for _ in range(count)]
            if kind in _GGUF_SCALARS:
                return read(_GGUF_SCALARS[kind])
            raise ValueError(f"unknown GGUF value type {kind}")

        def skip(kind: int) -> None:
            if kind == 8:
                handle.seek(read("<Q"), os.SEEK_CUR)
            elif kind == 9:
                item, count = read("<I"), read("<Q")
                if item in _GGUF_SCALARS:
                    handle.seek(count * struct.calcsize(_GGUF_SCALARS[item]), os.SEEK_CUR)
                else:
                    for _ in range(count):
                        skip(item)
            elif kind in _GGUF_SCALARS:
                handle.seek(struct.calcsize(_GGUF_SCALARS[kind]), os.SEEK_CUR)
            else:
                raise ValueError(f"unknown GGUF value type {kind}")

        if handle.read(4) != GGUF_MAGIC:
            raise ValueError("no GGUF magic")
        if read("<I") not in (2, 3):
            raise ValueError("not GGUF version 2 or 3")
        read("<Q")  # tensor count
        for _ in range(read("<Q")):
            key, kind = string(), read("<I")
            if key in wanted:
                found[key] = value(kind)
                if len(found) == len(wanted):
                    break
            else:
                skip(kind)
    missing = wanted - set(found)
    if missing:
        raise KeyError(", ".join(sorted(missing)))
    return found


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


def cache_root() -> Path:
    """Where de-quantised GGUF weights are kept: ``$OTLP_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/otlp``, else ``~/.cache/otlp``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "otlp"


@functools.cache
def _file_sha256(path: Path) -> str:
    """The file's SHA-256, read once per process."""
    from otlp.instances.realmodel.fetch import sha256

    return sha256(path)


def gguf_cache(path: Path) -> Path:
    """The cache folder of the GGUF file ``path``: keyed by its SHA-256 (a changed file gets a
    new folder), with ``tokenizer/`` and ``model/`` (config.json, model.safetensors) inside
    once each has been de-quantised."""
    return cache_root() / "gguf" / f"{path.stem}-{_file_sha256(path)[:16]}"


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
    what = "tokenizer" if tokenizer else "weights"
    folder, extra = source.path, {}
    cached: Path | None = None
    if source.format == "gguf":
        cached = gguf_cache(source.path) / ("tokenizer" if tokenizer else "model")
        if cached.is_dir():
            folder, cached = cached, None
        else:
            folder, extra = source.path.parent, {"gguf_file": source.path.name}
    try:
        with _quiet_gguf_reader():
            if tokenizer:
                loaded = AutoTokenizer.from_pretrained(str(folder), **extra)
            else:
                loaded = AutoModelForCausalLM.from_pretrained(
                    str(folder), dtype=torch.float32, **extra
                ).eval()
    except Exception as exc:  # whatever the file's reader raises: one line naming the flag
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"cannot load the {what} of {source.path}: {first}") from None
    if cached is not None:
        _save_cache(loaded, cached, tokenizer=tokenizer)
    return loaded


@contextlib.contextmanager
def _quiet_gguf_reader() -> Iterator[None]:
    """transformers' GGUF reader draws its own tqdm bar (not silenced by
    ``disable_progress_bar``): replace it by the bare iteration while loading."""
    try:
        from transformers import modeling_gguf_pytorch_utils as reader
    except ImportError:
        yield
        return
    bar = getattr(reader, "tqdm", None)
    reader.tqdm = lambda iterable, *args, **kwargs: iterable
    try:
        yield
    finally:
        if bar is not None:
            reader.tqdm = bar


def _save_cache(loaded: Any, folder: Path, *, tokenizer: bool) -> None:
    """Write ``loaded`` (a tokenizer, or a float32 model read from a GGUF file) to ``folder``
    atomically (a partial folder renamed; another process may win the race): the tokenizer with
    ``save_pretrained``, the model as ``config.json`` (without the GGUF quantisation entry) and
    ``model.safetensors`` (tied tensors stored once). A cache that cannot be written is skipped
    with a line on stderr: it only saves time."""
    partial = folder.with_name(f"{folder.name}.part{os.getpid()}")
    try:
        partial.mkdir(parents=True, exist_ok=True)
        if tokenizer:
            loaded.save_pretrained(partial)
        else:
            from safetensors.torch import save_model

            config = loaded.config.to_dict()
            config.pop("quantization_config", None)  # float32 now, not a GGUF file
            (partial / "config.json").write_text(json.dumps(config, indent=2))
            save_model(loaded, str(partial / "model.safetensors"), metadata={"format": "pt"})
        partial.replace(folder)
    except Exception as exc:  # the cache is optional
        shutil.rmtree(partial, ignore_errors=True)
        if not folder.is_dir():
            print(f"otlp: could not cache {folder}: {exc}", file=sys.stderr)
