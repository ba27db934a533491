"""A model's vocabulary read from its files, so that a draft with another tokenizer is refused
before either tokenizer is built.

Speculative decoding needs the draft's token ids to mean the target's tokens (Leviathan et al.
2023, "Fast Inference from Transformers via Speculative Decoding", §2: both models are laws over
one vocabulary). Building a tokenizer costs seconds (Gemma 3's 262,144 tokens: 2–4 s from the
float32 cache, about 40 s the first time from the GGUF file); the files hold the vocabulary as
data, read here in a fraction of that:

* a GGUF file: the metadata array ``tokenizer.ggml.tokens`` (the token of each id), read from
  the header without the tensors (:func:`~otlp.decoding.models.local.read_gguf_fields`: 0.1 s
  for Gemma 3);
* a model folder: ``tokenizer.json`` (its model's ``vocab``, token → id, or ``[token, score]``
  per id for a Unigram model, and its ``added_tokens``), else ``vocab.json`` with
  ``added_tokens.json``; a folder whose ``tokenizer_config.json`` puts an added token at
  another id (``added_tokens_decoder``) has no readable vocabulary here.

A built tokenizer holds its files' tokens at their ids, and may add more past them (a tokenizer
class's default special tokens: GPT-2's ``<|endoftext|>``, Llama's ``<s>``). So two files'
vocabularies prove two tokenizers different only where they *conflict* — a token at different
ids, or an id holding different tokens (:func:`first_conflict`); one extending the other is left
to the built tokenizers. Files are compared only when both are of one kind (two GGUF files, as
llama.cpp reads them, or two folders): transformers' GGUF reader respells some tokens as it
builds a tokenizer (Gemma's runs of spaces as ``▁``: 30 of Gemma 3's tokens), so a GGUF file and
a folder of one tokenizer can spell tokens differently. Whatever the files leave open (a folder
with only ``tokenizer.model``, a GGUF file beside a folder, no conflict) is decided on the built
tokenizers' ``get_vocab()`` (:func:`check_same_vocabulary`).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from otlp.decoding.models.local import read_gguf_fields

GGUF_TOKENS = "tokenizer.ggml.tokens"


@dataclass(frozen=True)
class FileVocabulary:
    """The token → id map a model's files hold, and their kind (``"gguf"`` or ``"folder"``)."""

    kind: str
    ids: dict[str, int]


def read_vocabulary(path: Path) -> FileVocabulary | None:
    """The vocabulary of the model file or folder at ``path`` (see the module docstring), or
    None where its files do not hold one that can be read without building the tokenizer."""
    try:
        if path.is_dir():
            ids = _folder_ids(path)
            return None if ids is None else FileVocabulary("folder", ids)
        tokens = read_gguf_fields(path, (GGUF_TOKENS,))[GGUF_TOKENS]
    except (KeyError, ValueError, TypeError, AttributeError, IndexError, OSError, struct.error):
        return None  # malformed files: the built tokenizers are compared (and report it)
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        return None
    return FileVocabulary("gguf", {token: index for index, token in enumerate(tokens)})


def _json(file: Path) -> Any:
    return json.loads(file.read_text(encoding="utf-8")) if file.is_file() else None


def _folder_ids(folder: Path) -> dict[str, int] | None:
    tokenizer = _json(folder / "tokenizer.json")
    if isinstance(tokenizer, dict):
        vocab = (tokenizer.get("model") or {}).get("vocab")
        if isinstance(vocab, dict):
            ids = {str(token): int(index) for token, index in vocab.items()}
        elif isinstance(vocab, list):  # Unigram: [token, score] per id
            ids = {str(entry[0]): index for index, entry in enumerate(vocab)}
        else:
            return None
        added = {str(a["content"]): int(a["id"]) for a in tokenizer.get("added_tokens") or []}
    else:
        vocab = _json(folder / "vocab.json")
        if not isinstance(vocab, dict):
            return None
        ids = {str(token): int(index) for token, index in vocab.items()}
        added = {str(t): int(i) for t, i in (_json(folder / "added_tokens.json") or {}).items()}
    ids.update(added)
    decoder = (_json(folder / "tokenizer_config.json") or {}).get("added_tokens_decoder") or {}
    for index, token in decoder.items():
        content = str(token["content"]) if isinstance(token, dict) else str(token)
        if content in ids and ids[content] != int(index):
            return None  # the files disagree: left to transformers
    return ids


def check_files_share_vocabulary(
    target: Path, draft: Path, target_flag: str = "target", draft_flag: str = "draft"
) -> None:
    """A ``ValueError`` naming ``draft_flag`` when the vocabularies of the model files ``target``
    and ``draft`` (both readable, of one kind) conflict (:func:`first_conflict`); else nothing:
    the built tokenizers decide."""
    if target.resolve() == draft.resolve():
        return
    ours = read_vocabulary(target)
    theirs = None if ours is None else read_vocabulary(draft)
    if ours is None or theirs is None or ours.kind != theirs.kind:
        return
    conflict = first_conflict(ours.ids, theirs.ids, target_flag, draft_flag)
    if conflict:
        raise _differs(
            target_flag,
            draft_flag,
            f"{conflict}; its files hold {len(theirs.ids)} tokens, {target_flag}'s {len(ours.ids)}",
        )


def first_conflict(
    target: Mapping[str, int],
    draft: Mapping[str, int],
    target_flag: str = "target",
    draft_flag: str = "draft",
) -> str:
    """The first token of ``target`` (by id) that ``draft`` puts at another id, or whose id
    ``draft`` gives to another token, in words (``"target maps 'a' to 3, draft maps it to 5"``);
    ``""`` when the two maps agree wherever both define a token or an id."""
    return _first_difference(target, draft, target_flag, draft_flag, lacking=False)


def check_same_vocabulary(
    target: Mapping[str, int],
    draft: Mapping[str, int],
    target_flag: str = "target",
    draft_flag: str = "draft",
) -> None:
    """``ValueError`` naming ``draft_flag`` unless the two token → id maps (built tokenizers'
    ``get_vocab()``) are equal: the sizes, else the first token (by id) that differs."""
    if target == draft:
        return
    if len(target) != len(draft):
        raise ValueError(
            f"{draft_flag}: its tokenizer has {len(draft)} tokens, {target_flag}'s "
            f"{len(target)}: target and draft must share a tokenizer"
        )
    difference = _first_difference(target, draft, target_flag, draft_flag, lacking=True)
    raise _differs(target_flag, draft_flag, difference)


def _first_difference(
    target: Mapping[str, int],
    draft: Mapping[str, int],
    target_flag: str,
    draft_flag: str,
    *,
    lacking: bool,
) -> str:
    """The first token of ``target`` (by id) that ``draft`` does not hold at its id, in words:
    ``draft`` maps it to another id, else (``lacking`` False) gives its id to another token,
    else (``lacking`` True) lacks it; ``""`` when there is none."""
    tokens: dict[int, str] = {} if lacking else {index: token for token, index in draft.items()}
    for token, index in sorted(target.items(), key=lambda item: item[1]):
        if draft.get(token) == index:
            continue
        if token in draft:
            where = f"maps it to {draft[token]}"
        elif index in tokens:
            where = f"maps {index} to {tokens[index]!r}"
        elif lacking:
            where = "lacks it"
        else:
            continue
        return f"{target_flag} maps {token!r} to {index}, {draft_flag} {where}"
    return ""


def _differs(target_flag: str, draft_flag: str, detail: str) -> ValueError:
    """The refusal of a draft whose tokenizer differs from the target's, ``detail`` in brackets."""
    return ValueError(
        f"{draft_flag}: its tokenizer differs from {target_flag}'s ({detail}): target and draft "
        "must share a tokenizer"
    )
