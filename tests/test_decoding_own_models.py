"""A user's own model pair on disk: tiny random Llama models saved with ``save_pretrained`` and
a shared tokenizer built with ``tokenizers``, decoded through the CLI, a ``[decode]`` config and
``load_model_pair``; a draft with another tokenizer, missing paths, non-models and unsupported
architectures refused naming the flag; the SmolLM2 GGUF as --model and --draft-model."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from otlp.cli import main  # noqa: E402
from otlp.decoding.loop import Speculation, decode  # noqa: E402
from otlp.decoding.models import local  # noqa: E402
from otlp.decoding.models.hf import HFTreeLM  # noqa: E402
from otlp.decoding.models.pair import load_model_pair  # noqa: E402
from otlp.decoding.models.precision import convert, fidelity  # noqa: E402
from tests.tiny_models import tiny_causal_lm  # noqa: E402

WORDS = [
    "<eos>",
    "<unk>",
    *[
        "the",
        "a",
        "cat",
        "dog",
        "sat",
        "on",
        "mat",
        "and",
        "ran",
        "to",
        "park",
        "is",
        "big",
        "small",
        "red",
        "blue",
    ],
]
ARCHITECTURES = {
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
}


def tokenizer(words: list[str]) -> Any:
    model = tokenizers.models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>")
    tok = tokenizers.Tokenizer(model)
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<eos>", unk_token="<unk>"
    )


def save_model(
    folder: Path, *, layers: int, seed: int, arch: str = "llama", words: list[str] = WORDS
) -> Path:
    model = tiny_causal_lm(
        getattr(transformers, ARCHITECTURES[arch]),
        vocab=len(words),
        width=32,
        layers=layers,
        heads=4,
        positions=128,
        sharpen=20.0,  # sharper laws than the default init: greedy decoding is stable
        seed=seed,
        eos_token_id=0,
        bos_token_id=None,
        pad_token_id=None,
    )
    model.save_pretrained(folder)
    tokenizer(words).save_pretrained(folder)
    return folder


def save_truncated(source: Path, folder: Path, layers: int) -> Path:
    """The first ``layers`` decoder layers of the model at ``source``, saved as a model of its
    own (a cheap draft that often agrees with its target)."""
    model = transformers.AutoModelForCausalLM.from_pretrained(source)
    model.model.layers = model.model.layers[:layers]
    model.config.num_hidden_layers = layers
    model.save_pretrained(folder)
    tokenizer(WORDS).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    shuffled = WORDS[:2] + WORDS[:1:-1]  # the same words, other ids
    return {
        "target": save_model(root / "target", layers=3, seed=0),
        "draft": save_truncated(root / "target", root / "draft", layers=2),
        "other": save_model(root / "other", layers=1, seed=1, words=shuffled),
        "bigger": save_model(root / "bigger", layers=1, seed=1, words=[*WORDS, "extra"]),
    }


# ----- loading and the tree adapter -----------------------------------------------------------
@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_each_accepted_architecture_runs_in_the_tree_adapter(arch: str, tmp_path: Path) -> None:
    """Every architecture inspect_model accepts gives, through HFTreeLM's tree forward, the laws
    of the model's own transformers forward."""
    folder = save_model(tmp_path / arch, layers=2, seed=3, arch=arch)
    source = local.inspect_model(folder)
    assert (source.architecture, source.layers, source.format) == (arch, 2, "folder")
    model = local.load_model(source)
    ids = [2, 3, 4, 5, 6, 7]
    with torch.no_grad():
        want = model(torch.tensor([ids])).logits[0].double().softmax(-1).numpy()
    session = HFTreeLM(model).session([ids[:3]])
    laws = session.forward(np.array([ids[3:]]), np.array([-1, 0, 1]), np.array([0]))
    assert np.abs(laws[0] - want[2:]).max() < 1e-5


def test_python_pair_decodes_greedy_exactly_like_the_target(models: dict[str, Path]) -> None:
    pair = load_model_pair(models["target"], models["draft"])
    assert (pair.name, pair.draft_name, pair.stop_tokens) == ("target", "draft", (0,))
    target, draft = pair(0.0, "draft")
    assert draft.name == "draft" and len(draft.model.model.layers) == 2  # type: ignore[attr-defined]
    prompts = [pair.encode_prompt("the cat sat on"), pair.encode_prompt("a dog")]
    assert prompts[0] == [2, 4, 6, 7]
    ar = decode(target, None, prompts, Speculation.autoregressive(), max_new_tokens=12)
    out = decode(target, draft, prompts, Speculation.paths("gbv", 2, 3), max_new_tokens=12, seed=1)
    assert out.tokens == ar.tokens
    assert out.target_calls < ar.target_calls
    assert pair.decode_text([4, 6]) == "cat sat"


def test_self_speculative_drafts_of_an_own_model(models: dict[str, Path]) -> None:
    pair = load_model_pair(models["target"])
    assert pair.default_draft == "lookup"
    assert pair(1.0, "exit2")[1].layer_ids == (0, 1)  # type: ignore[attr-defined]
    assert pair(1.0, "skip:1")[1].layer_ids == (0, 2)  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="no named skip sets"):
        pair(1.0, "skip4")  # SmolLM2's measured skip sets do not apply to other models
    with pytest.raises(ValueError, match="1 <= N <= 3"):
        pair(1.0, "exit9")


def test_a_draft_with_another_tokenizer_is_refused(
    models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A draft with one token more agrees with the target's files wherever both define a token:
    its built tokenizer refuses it. Another token order is refused by the files, before any
    tokenizer is built (building one fails here)."""
    with pytest.raises(ValueError, match=r"^draft: its tokenizer has 19 tokens, target's 18"):
        load_model_pair(models["target"], models["bigger"])

    def unbuilt(*args: Any) -> Any:
        raise AssertionError("a tokenizer was built")

    monkeypatch.setattr(local, "load_tokenizer", unbuilt)
    with pytest.raises(ValueError, match=r"^draft: its tokenizer differs .* maps 'the' to 2"):
        load_model_pair(models["target"], models["other"])


def test_a_matching_pair_is_compared_on_its_files_then_loads(
    models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from otlp.decoding.models import vocab

    compared, first_conflict = [], vocab.first_conflict
    monkeypatch.setattr(
        vocab, "first_conflict", lambda *args: compared.append(args[:2]) or first_conflict(*args)
    )
    pair = load_model_pair(models["target"], models["draft"])
    assert pair.draft_name == "draft" and pair.vocab_size == 18
    assert [len(ids) for ids in compared[0]] == [18, 18] and len(compared) == 1


def test_paths_that_are_not_supported_models_are_refused(
    models: dict[str, Path], tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match=r"^target: no such file"):
        load_model_pair(tmp_path / "missing")
    with pytest.raises(ValueError, match=r"no config\.json"):
        local.inspect_model(tmp_path)
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ValueError, match="neither a model folder nor a GGUF file"):
        local.inspect_model(tmp_path / "notes.txt")
    gpt2 = tmp_path / "gpt2"
    transformers.GPT2LMHeadModel(
        transformers.GPT2Config(n_layer=1, n_embd=8, n_head=2)
    ).save_pretrained(gpt2)
    with pytest.raises(ValueError, match="'gpt2' model; the tree adapter runs Llama-style"):
        local.inspect_model(gpt2, "--model")
    weightless = tmp_path / "weightless"
    weightless.mkdir()
    shutil.copy(models["target"] / "config.json", weightless / "config.json")
    with pytest.raises(ValueError, match="has no weights"):
        local.inspect_model(weightless)
    untokenized = tmp_path / "untokenized"
    untokenized.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(models["target"] / name, untokenized / name)
    with pytest.raises(ValueError, match="has no tokenizer"):
        local.inspect_model(untokenized)
    corrupt = tmp_path / "corrupt"
    shutil.copytree(models["target"], corrupt)
    (corrupt / "model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(ValueError, match=r"^--model: cannot load the weights of .*corrupt"):
        local.load_model(local.inspect_model(corrupt), "--model")


# ----- the command line -----------------------------------------------------------------------
def run_cli(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    code = main(["decode", "--no-progress", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_decodes_a_model_pair_from_disk(
    models: dict[str, Path], capsys: pytest.CaptureFixture
) -> None:
    argv = ["--model", str(models["target"]), "--draft-model", str(models["draft"])]
    argv += ["--prompt", "the cat sat", "--compare", "sps,gbv", "--paths", "2", "--depth", "2"]
    code, out, err = run_cli(
        [*argv, "--temperature", "0", "--max-new-tokens", "10", "--json"], capsys
    )
    assert code == 0, err
    data = json.loads(out)
    rows = {row["method"]: row for row in data["rows"]}
    assert set(rows) == {"ar", "sps", "gbv"}
    assert {row["draft"] for m, row in rows.items() if m != "ar"} == {"draft"}  # ar drafts none
    assert data["texts"]["sps"] == data["texts"]["gbv"] == data["texts"]["ar"]  # greedy: lossless
    assert rows["sps"]["block_efficiency"] > 1.0
    assert data["precision"] == "float32" and data["fidelity"] == {}


def test_cli_refuses_a_draft_model_with_another_tokenizer(
    models: dict[str, Path], capsys: pytest.CaptureFixture
) -> None:
    argv = ["--model", str(models["target"]), "--draft-model", str(models["other"])]
    code, _, err = run_cli(argv, capsys)
    assert code == 2
    assert err.strip().startswith("otlp decode: error: --draft-model: its tokenizer differs")


def test_the_toy_pair_refuses_a_draft_model(
    models: dict[str, Path], capsys: pytest.CaptureFixture
) -> None:
    code, _, err = run_cli(["--model", "toy", "--draft-model", str(models["draft"])], capsys)
    assert code == 2
    assert err.strip() == "otlp decode: error: --draft-model: the toy model pair has its own draft"


def test_config_decodes_a_model_pair_from_disk(
    models: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    config = tmp_path / "own.toml"
    config.write_text(
        f'[decode]\nmodel = "{models["target"]}"\ndraft_model = "{models["draft"]}"\n'
        'methods = ["block", "gbv"]\npaths = [1, 2]\ndepths = [2]\ntemperatures = [1.0]\n'
        'max_new_tokens = 6\nprompts = ["the cat", "a dog ran"]\n'
    )
    out = tmp_path / "out"
    code, _, err = run_cli(["--config", str(config), "--out", str(out)], capsys)
    assert code == 0, err
    rows = json.loads((out / "decode.json").read_text())
    assert {(r["method"], r["shape"], r["draft"]) for r in rows} == {
        ("ar", "-", ""),  # ar drafts nothing
        ("block", "1x2", "draft"),
        ("gbv", "2x2", "draft"),
    }


# ----- the CPU fast path ----------------------------------------------------------------------
def test_int8_replaces_every_linear_layer_of_a_copy(models: dict[str, Path]) -> None:
    model = local.load_model(local.inspect_model(models["target"]))
    linear = sum(isinstance(m, torch.nn.Linear) for m in model.modules())
    quantised = convert(model, "int8")
    dynamic = torch.ao.nn.quantized.dynamic.Linear
    assert sum(isinstance(m, dynamic) for m in quantised.modules()) == linear > 0
    assert not any(isinstance(m, torch.nn.Linear) for m in quantised.modules())
    assert sum(isinstance(m, torch.nn.Linear) for m in model.modules()) == linear  # untouched
    assert convert(model, "bfloat16").lm_head.weight.dtype == torch.bfloat16
    assert model.lm_head.weight.dtype == torch.float32
    assert convert(model, "float32") is model


def test_fidelity_is_the_kl_and_tv_of_next_token_laws(models: dict[str, Path]) -> None:
    """fidelity() against KL and TV computed here from each model's own forward."""
    model = local.load_model(local.inspect_model(models["target"]))
    sequences = [[2, 4, 6, 7, 2, 8], [3, 5, 9]]
    assert fidelity(model, model, sequences, "float32").mean_tv == 0.0
    for precision in ("bfloat16", "int8"):
        other = convert(model, precision)
        kl, tv = [], []
        for ids in sequences:
            with torch.no_grad():
                p = model(torch.tensor([ids])).logits[0].double().log_softmax(-1)
                q = other(torch.tensor([ids])).logits[0].double().log_softmax(-1)
            kl.extend((p.exp() * (p - q)).sum(-1).tolist())
            tv.extend((0.5 * (p.exp() - q.exp()).abs().sum(-1)).tolist())
        got = fidelity(model, other, sequences, precision)
        assert (got.positions, got.sequences) == (9, 2)
        assert got.mean_kl == pytest.approx(np.mean(kl), rel=1e-6, abs=1e-12)
        assert got.mean_tv == pytest.approx(np.mean(tv), rel=1e-6)
        assert got.max_tv == pytest.approx(max(tv), rel=1e-6)
        assert 0 < got.mean_tv < 0.1


def test_int8_decoding_is_lossless_for_the_int8_models(models: dict[str, Path]) -> None:
    """Greedy speculative decoding with the int8 pair emits the int8 target's greedy text."""
    pair = load_model_pair(models["target"], models["draft"], precision="int8")
    target, draft = pair(0.0)
    prompts = [pair.encode_prompt("the cat sat on"), pair.encode_prompt("a dog")]
    ar = decode(target, None, prompts, Speculation.autoregressive(), max_new_tokens=12)
    out = decode(target, draft, prompts, Speculation.paths("sps", 1, 3), max_new_tokens=12, seed=2)
    assert out.tokens == ar.tokens
    measured = pair.fidelity(limit=3)
    assert set(measured) == {"target", "draft"}
    assert all(f.precision == "int8" and f.sequences == 3 for f in measured.values())
    assert load_model_pair(models["target"]).fidelity() == {}


def test_cli_prints_the_fidelity_beside_the_timings(
    models: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    argv = ["--model", str(models["target"]), "--draft-model", str(models["draft"])]
    argv += ["--method", "sps", "--paths", "1", "--depth", "2", "--max-new-tokens", "4"]
    argv += ["--prompt", "the cat"]
    code, out, err = run_cli([*argv, "--precision", "int8", "--markdown"], capsys)
    assert code == 0, err
    assert "| sps |" in out
    assert "target int8 vs float32: mean KL" in out and "draft int8 vs float32: mean KL" in out
    assert "lossless with respect to the models run" in out
    code, out, err = run_cli([*argv, "--precision", "bfloat16", "--json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert data["precision"] == "bfloat16"
    assert data["fidelity"]["target"]["positions"] > 100
    code, out, _ = run_cli(argv, capsys)
    assert code == 0 and "vs float32" not in out
    config = tmp_path / "int8.toml"
    config.write_text(
        f'[decode]\nmodel = "{models["target"]}"\nprecision = "int8"\nmethods = ["sps"]\n'
        "paths = [1]\ndepths = [1]\ntemperatures = [1.0]\nmax_new_tokens = 3\n"
        'prompts = ["the cat"]\ndrafts = ["exit1"]\n'
    )
    code, out, err = run_cli(["--config", str(config), "--out", str(tmp_path / "o")], capsys)
    assert code == 0, err
    assert "target int8 vs float32" in (tmp_path / "o" / "decode.md").read_text()
    assert json.loads((tmp_path / "o" / "fidelity.json").read_text())["target"]["mean_tv"] > 0


# ----- the SmolLM2 GGUF as a model file (the llm extra and the fetched weights) ----------------
@pytest.fixture(scope="module")
def gguf() -> Path:
    from otlp.instances.realmodel.fetch import fetch

    try:
        return fetch()
    except Exception as exc:  # no network and no cached weights
        pytest.skip(f"SmolLM2 GGUF not available: {exc}")


@pytest.mark.slow
def test_gguf_files_as_model_and_draft_model(
    gguf: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A GGUF path as --model (a copy: loaded by transformers' GGUF reader) and the fetched
    SmolLM2 GGUF as --draft-model (its float32 cache); greedy decoding equals ar."""
    copy = tmp_path / "copy.gguf"
    try:
        os.link(gguf, copy)
    except OSError:
        shutil.copy(gguf, copy)
    torch.set_num_threads(1)
    argv = ["--model", str(copy), "--draft-model", str(gguf), "--prompt", "Name a colour."]
    argv += ["--compare", "gbv", "--paths", "2", "--depth", "2", "--temperature", "0"]
    code, out, err = run_cli([*argv, "--max-new-tokens", "4", "--json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert {row["draft"] for row in data["rows"] if row["method"] != "ar"} == {"smollm2"}
    assert data["texts"]["gbv"] == data["texts"]["ar"]
