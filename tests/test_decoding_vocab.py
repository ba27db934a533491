"""Vocabularies compared on the files before any tokenizer is built
(:mod:`otlp.decoding.models.vocab`).

* The readers give what transformers builds: a folder's ``tokenizer.json`` (WordLevel and
  Unigram, saved by transformers) equals the built tokenizer's ``get_vocab()``, a ``vocab.json``
  folder is a part of it (the class adds its default special token); a cut GGUF file, a folder
  without a vocabulary or with an added token at two ids have no readable vocabulary.
* Tiny GGUF files written here (``gguf.GGUFWriter``: a header with a token list, no tensors): a
  draft putting a token at another id, or another token at an id, is refused naming its flag
  while building a tokenizer fails the test, through ``load_model_pair`` and ``otlp decode``; a
  draft with the same or an extended vocabulary goes on to build its tokenizers; a GGUF file
  beside a folder is left to the built tokenizers.
* The fetched SmolLM2 and Gemma 3 GGUF files (skipped when absent): refused by their files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
gguf = pytest.importorskip("gguf")

from otlp.cli import main  # noqa: E402
from otlp.commands import decode as decode_command  # noqa: E402
from otlp.decoding.models import local, vocab  # noqa: E402
from otlp.decoding.models.pair import load_model_pair  # noqa: E402
from tests.cli_errors import usage_error  # noqa: E402

WORDS = ["<eos>", "<unk>", "the", "a", "cat", "dog", "sat", "on", "mat", "and", "ran", "to"]
SHUFFLED = WORDS[:2] + WORDS[:1:-1]  # the same words, other ids


class Built(Exception):
    """Raised by the patched builders: a tokenizer or weights were about to be built."""


@pytest.fixture
def no_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building any tokenizer or model fails the test with :class:`Built`."""

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise Built

    from otlp.decoding.models import smollm2

    for module, name in ((local, "load_tokenizer"), (local, "load_model"), (smollm2, "load")):
        monkeypatch.setattr(module, name, fail)


def gguf_file(path: Path, tokens: list[str] | None) -> Path:
    """A GGUF header of a 2-layer llama model with ``tokens`` as its vocabulary (no tensors)."""
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(2)
    if tokens is not None:
        writer.add_token_list(tokens)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def fast_tokenizer(folder: Path, words: list[str]) -> Path:
    model = tokenizers.models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>")
    tok = tokenizers.Tokenizer(model)
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<eos>", unk_token="<unk>"
    ).save_pretrained(folder)
    return folder


def built_vocab(folder: Path) -> dict[str, int]:
    return dict(transformers.AutoTokenizer.from_pretrained(str(folder)).get_vocab())


# ----- the readers ------------------------------------------------------------------------------
def test_gguf_vocabulary_is_its_token_list(tmp_path: Path) -> None:
    file = gguf_file(tmp_path / "m.gguf", WORDS)
    assert vocab.read_vocabulary(file) == vocab.FileVocabulary(
        "gguf", {w: i for i, w in enumerate(WORDS)}
    )
    assert vocab.read_vocabulary(gguf_file(tmp_path / "none.gguf", None)) is None
    cut = tmp_path / "cut.gguf"
    data = file.read_bytes()
    for end in (data.index(b"ran"), data.rindex(b"to") + 1):  # inside a token, the last one
        cut.write_bytes(data[:end])
        assert vocab.read_vocabulary(cut) is None


def test_folder_vocabulary_is_what_transformers_builds(tmp_path: Path) -> None:
    wordlevel = fast_tokenizer(tmp_path / "wordlevel", WORDS)
    unigram = tmp_path / "unigram"
    pieces = [("<unk>", 0.0), ("▁the", -1.0), ("▁cat", -2.0), ("s", -3.0)]
    backend = tokenizers.Tokenizer(tokenizers.models.Unigram(pieces, unk_id=0))
    backend.add_special_tokens(["<eos>"])
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<eos>")
    fast.save_pretrained(unigram)
    for folder, size in ((wordlevel, 12), (unigram, 5)):
        found = vocab.read_vocabulary(folder)
        assert found == vocab.FileVocabulary("folder", built_vocab(folder))
        assert len(found.ids) == size

    slow = tmp_path / "slow"  # a GPT-2 folder without tokenizer.json
    slow.mkdir()
    (slow / "vocab.json").write_text(json.dumps({w: i for i, w in enumerate(["a", "b", "ab"])}))
    (slow / "merges.txt").write_text("#version: 0.2\na b\n")
    (slow / "added_tokens.json").write_text(json.dumps({"<eos>": 3}))
    config = {"tokenizer_class": "GPT2Tokenizer", "eos_token": "<eos>"}
    (slow / "tokenizer_config.json").write_text(json.dumps(config))
    found = vocab.read_vocabulary(slow)
    assert found is not None and found.ids == {"a": 0, "b": 1, "ab": 2, "<eos>": 3}
    assert built_vocab(slow) == {**found.ids, "<|endoftext|>": 4}  # GPT-2's default token

    decoder = {"added_tokens_decoder": {"5": {"content": "<eos>", "special": True}}}
    (slow / "tokenizer_config.json").write_text(json.dumps({**config, **decoder}))
    assert vocab.read_vocabulary(slow) is None  # <eos> at 3 and at 5
    (slow / "vocab.json").unlink()
    assert vocab.read_vocabulary(slow) is None


# ----- refused before any tokenizer is built ----------------------------------------------------
def test_a_gguf_draft_with_another_vocabulary_is_refused_unbuilt(
    tmp_path: Path, no_build: None
) -> None:
    target = gguf_file(tmp_path / "target.gguf", WORDS)
    shuffled = gguf_file(tmp_path / "shuffled.gguf", SHUFFLED)
    other = gguf_file(tmp_path / "other.gguf", [w.replace("cat", "cow") for w in WORDS])
    with pytest.raises(ValueError) as refused:
        load_model_pair(target, shuffled)
    assert str(refused.value) == (
        "draft: its tokenizer differs from target's (target maps 'the' to 2, draft maps it to "
        "11; its files hold 12 tokens, target's 12): target and draft must share a tokenizer"
    )
    with pytest.raises(ValueError, match=r"^-d: .* \(-m maps 'cat' to 4, -d maps 4 to 'cow'; "):
        load_model_pair(target, other, target_flag="-m", draft_flag="-d")
    for same in ([*WORDS], [*WORDS, "extra"]):  # the same or an extended vocabulary
        with pytest.raises(Built):  # ... goes on to the built tokenizers
            load_model_pair(target, gguf_file(tmp_path / f"{len(same)}.gguf", same))


def test_cli_refuses_a_gguf_draft_with_another_vocabulary_unbuilt(
    tmp_path: Path, no_build: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    target = gguf_file(tmp_path / "target.gguf", WORDS)
    other = gguf_file(tmp_path / "other.gguf", SHUFFLED)

    def load_pair(*args: Any) -> Any:
        raise Built

    monkeypatch.setattr(decode_command, "_load_pair", load_pair)  # refused before torch loads
    argv = ["decode", "--no-progress", "--model", str(target), "--draft-model", str(other)]
    assert usage_error(argv, capsys).startswith(
        "otlp decode: error: --draft-model: its tokenizer differs from --model's (--model maps "
        "'the' to 2, --draft-model maps it to 11;"
    )


def test_cli_reads_each_vocabulary_once(
    tmp_path: Path, no_build: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """`otlp decode --draft-model` compares the files once, before torch loads: the pair it then
    loads is told so (Gemma 3's vocabulary costs 0.15 s a read)."""
    pytest.importorskip("torch")
    target = gguf_file(tmp_path / "target.gguf", WORDS)
    draft = gguf_file(tmp_path / "draft.gguf", [*WORDS, "extra"])
    read: list[Path] = []

    def counted(path: Path) -> Any:
        read.append(path)
        return reader(path)

    reader = vocab.read_vocabulary
    monkeypatch.setattr(vocab, "read_vocabulary", counted)
    main(["decode", "--no-progress", "--model", str(target), "--draft-model", str(draft)])
    assert "internal error: Built" in capsys.readouterr().err  # on to the tokenizers
    assert read == [target.resolve(), draft.resolve()]


def test_a_gguf_file_beside_a_folder_is_left_to_the_built_tokenizers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_build: None
) -> None:
    """Transformers respells some GGUF tokens as it builds a tokenizer, so a GGUF file is not
    compared with a folder's files: the built tokenizers are (stubs here)."""
    target = gguf_file(tmp_path / "target.gguf", WORDS)
    folder = fast_tokenizer(tmp_path / "draft", SHUFFLED)
    (folder / "config.json").write_text('{"model_type": "llama", "num_hidden_layers": 1}')
    (folder / "model.safetensors").write_bytes(b"unused")
    with pytest.raises(Built):
        load_model_pair(target, folder)

    class Stub:
        def __init__(self, words: list[str]) -> None:
            self.words = words

        def get_vocab(self) -> dict[str, int]:
            return {w: i for i, w in enumerate(self.words)}

    built = {target.resolve(): Stub(WORDS), folder.resolve(): Stub(SHUFFLED)}
    monkeypatch.setattr(local, "load_tokenizer", lambda source, flag: built[source.path])
    with pytest.raises(ValueError, match=r"^draft: its tokenizer differs from target's"):
        load_model_pair(target, folder)


# ----- the built tokenizers' maps ---------------------------------------------------------------
def test_built_vocabularies_are_compared_by_size_then_first_token() -> None:
    class Unwalked(dict):  # equal maps are not walked (262,144 entries for Gemma 3)
        def items(self) -> Any:
            raise AssertionError("walked")

    ids = {w: i for i, w in enumerate(WORDS)}
    vocab.check_same_vocabulary(Unwalked(ids), ids, "-m", "-d")
    with pytest.raises(ValueError) as refused:
        vocab.check_same_vocabulary(ids, {**ids, "extra": 12}, "-m", "-d")
    assert str(refused.value) == (
        "-d: its tokenizer has 13 tokens, -m's 12: target and draft must share a tokenizer"
    )
    for draft, where in (
        ({w: i for i, w in enumerate(SHUFFLED)}, "maps it to 11"),
        ({w.replace("the", "teh"): i for i, w in enumerate(WORDS)}, "lacks it"),
    ):
        with pytest.raises(ValueError) as refused:
            vocab.check_same_vocabulary(ids, draft, "-m", "-d")
        assert str(refused.value) == (
            f"-d: its tokenizer differs from -m's (-m maps 'the' to 2, -d {where}): target and "
            "draft must share a tokenizer"
        )


# ----- the fetched real models --------------------------------------------------------------------
def test_smollm2_and_gemma3_are_refused_by_their_files(no_build: None) -> None:
    from otlp.instances.realmodel import fetch, fetch_gemma3

    smollm2, gemma3 = fetch.gguf_path(), fetch_gemma3.gguf_path()
    if not (smollm2.is_file() and gemma3.is_file()):
        pytest.skip("SmolLM2 or Gemma 3 GGUF not fetched (otlp.instances.realmodel.fetch[_gemma3])")
    message = (
        r"^--draft-model: its tokenizer differs from --model's \(--model maps '<\|endoftext\|>' "
        r"to 0, --draft-model maps 0 to '<pad>'; its files hold 262144 tokens, --model's 49152\)"
    )
    with pytest.raises(ValueError, match=message):
        load_model_pair("smollm2", "gemma3", target_flag="--model", draft_flag="--draft-model")
