"""Tree models: the transformers adapter (tree attention mask, KV cache kept across steps) on
a tiny random Llama, and a short real SmolLM2-135M run (one model loaded per session)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from otlp.decoding.loop import Speculation, decode  # noqa: E402
from otlp.decoding.models.hf import HFTreeLM  # noqa: E402
from tests.tiny_models import tiny_causal_lm, tree_forward_error  # noqa: E402


@pytest.fixture(scope="module")
def tiny() -> object:
    # sharpen: laws sharper than the default init's, so that greedy is stable
    return tiny_causal_lm(
        transformers.LlamaForCausalLM,
        vocab=40,
        width=32,
        layers=4,
        heads=4,
        positions=256,
        sharpen=30.0,
    )


def full(model: HFTreeLM, prefix: list[int]) -> np.ndarray:
    return model.prefix_laws(np.array([prefix]))[0]


def test_tree_forward_matches_full_prefix_forwards_across_steps(tiny: object):
    model = HFTreeLM(tiny)
    assert (
        tree_forward_error(model, lambda prefix: full(model, prefix), [[3, 7, 1], [5]], 40) < 1e-5
    )


def test_draft_fed_depth_by_depth_matches_one_tree_forward(tiny: object):
    draft = HFTreeLM(tiny, layers=[0, 2])
    one, two = draft.session([[4, 4]]), draft.session([[4, 4]])
    tokens, parents = np.array([[1, 2, 3]]), np.array([-1, -1, 0])
    at_once = one.forward(tokens, parents, np.array([0]))
    root = two.forward(np.zeros((1, 0), np.int64), np.zeros(0, np.int64), np.array([0]))
    first = two.forward(tokens[:, :2], parents[:2], np.array([0]))
    second = two.forward(tokens[:, 2:], parents[2:], np.array([0]))
    stacked = np.concatenate([root[:, :1], first[:, 1:], second[:, 1:]], axis=1)
    assert np.abs(stacked - at_once).max() < 1e-5


@pytest.mark.parametrize("method", ["sps", "gbv", "global_resolution"])
def test_greedy_speculative_decoding_equals_greedy_sampling(tiny: object, method: str):
    target = HFTreeLM(tiny, temperature=0.0)
    draft = HFTreeLM(tiny, layers=[0, 1, 3], temperature=0.0)
    prompts = [[1, 2, 3], [7]]
    ar = decode(target, None, prompts, Speculation.autoregressive(), max_new_tokens=24)
    spec = Speculation.paths(method, 1 if method == "sps" else 2, 3)
    out = decode(target, draft, prompts, spec, max_new_tokens=24, seed=3)
    assert out.tokens == ar.tokens
    assert out.target_calls < ar.target_calls


def test_layers_are_checked(tiny: object):
    with pytest.raises(ValueError, match="layers"):
        HFTreeLM(tiny, layers=[0, 9])
    with pytest.raises(ValueError, match="temperature"):
        HFTreeLM(tiny, temperature=-1.0)


# ----- SmolLM2-135M (the llm extra and the GGUF; ~30 s to load once) ------------------------
@pytest.fixture(scope="session")
def smollm2() -> object:
    from otlp.decoding.models import smollm2 as module
    from otlp.instances.realmodel.fetch import fetch

    try:
        fetch()
    except Exception as exc:  # no network and no cached weights
        pytest.skip(f"SmolLM2 GGUF not available: {exc}")
    torch.set_num_threads(1)  # on a shared CPU, two threads wait on each other
    module.load()
    return module


@pytest.mark.slow
def test_smollm2_greedy_speculative_decoding_equals_greedy_sampling(smollm2: object):
    prompt = [smollm2.encode_prompt("Name three colours.")]  # type: ignore[attr-defined]
    target = smollm2.target(0.0)  # type: ignore[attr-defined]
    draft = smollm2.draft("skip4", 0.0)  # type: ignore[attr-defined]
    ar = decode(target, None, prompt, Speculation.autoregressive(), max_new_tokens=8)
    out = decode(target, draft, prompt, Speculation.paths("gbv", 2, 2), max_new_tokens=8)
    assert out.tokens == ar.tokens
    assert out.target_calls <= ar.target_calls


@pytest.mark.slow
def test_smollm2_sampled_decode_accounts_its_steps(smollm2: object):
    prompt = [smollm2.encode_prompt("Tell me a joke.")]  # type: ignore[attr-defined]
    target = smollm2.target(1.0)  # type: ignore[attr-defined]
    draft = smollm2.draft("skip4", 1.0)  # type: ignore[attr-defined]
    out = decode(target, draft, prompt, Speculation.paths("rrs", 2, 2), max_new_tokens=6)
    assert len(out.tokens[0]) == 6
    assert 1.0 <= out.block_efficiency <= 3.0
    assert out.target_s > 0 and out.draft_s > 0 and out.verify_s > 0
    text = smollm2.decode_text(out.tokens[0])  # type: ignore[attr-defined]
    assert isinstance(text, str) and text
