"""The referee on engines' layouts (issue 35 item 1): each layout's tensors are what the engine
takes, a lossless and a lossy sampler per layout get the right verdict, outputs that break a
layout are errors, and the docs' layout examples run."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from otlp.decoding import verify_chain
from otlp.referee import engines, referee
from otlp.referee.generators import Generators
from otlp.referee.layouts import LAYOUTS, LayoutSampler, _Tree
from otlp.referee.logits import keeping
from otlp.verification.engine_layouts import target_laws

ROOT = Path(__file__).resolve().parents[1]


def softmax(logits, temperature=1.0):
    with np.errstate(invalid="ignore"):
        z = logits / temperature
        z = np.exp(z - z.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


# --- chain (vLLM / FlashInfer) -----------------------------------------------------------


def chain_rejection(draft_token_ids, target_probs, draft_probs, rng, bonus_token_ids=None):
    """vLLM's rule (the numpy stand-in), the bonus drawn here unless the referee gives it."""
    if bonus_token_ids is None:
        last = target_probs[:, -1]
        bonus_token_ids = np.array([[rng.choice(last.shape[1], p=row)] for row in last])
    return engines.vllm_rejection_sampler(
        target_probs, bonus_token_ids, draft_probs, draft_token_ids, rng
    )


def chain_no_residual(draft_token_ids, target_probs, draft_probs, rng):
    """Lossy: the recovered token drawn from p, not from the residual."""
    return chain_rejection(draft_token_ids, target_probs, np.zeros_like(draft_probs) + 1e-300, rng)


def test_chain_lossless_and_lossy_exactly():
    verdict = referee(chain_rejection, protocol="chain", cases=8)
    assert verdict.status == "lossless" and verdict.exact_cases == 8, verdict.summary()
    assert all("chain" in row.label for row in verdict.gap)
    bad = referee(chain_no_residual, protocol="chain", cases=8)
    assert bad.status == "deviation" and bad.failure.kind == "exact", bad.summary()
    assert bad.protocol == "chain" and "(chain, iid)" in bad.summary()


def test_chain_with_the_bonus_drawn_by_the_referee_says_so():
    def vllm_like(draft_token_ids, target_probs, draft_probs, rng, bonus_token_ids):
        assert bonus_token_ids.shape == (draft_token_ids.shape[0], 1)
        return chain_rejection(draft_token_ids, target_probs, draft_probs, rng, bonus_token_ids)

    vllm_like.bonus = "referee"
    verdict = referee(vllm_like, protocol="chain", cases=8)
    assert verdict.status == "lossless" and verdict.exact_cases == 8, verdict.summary()
    assert "bonus token was drawn by the referee" in verdict.summary()

    def stale_bonus(draft_token_ids, target_probs, draft_probs, rng, bonus_token_ids):
        out = chain_rejection(draft_token_ids, target_probs, draft_probs, rng, bonus_token_ids)
        first = out[:, 0] != draft_token_ids[:, 0]
        out[first, 0] = bonus_token_ids[first, 0]  # the bonus row's token as the recovered one
        return out

    stale_bonus.bonus = "referee"
    bad = referee(stale_bonus, protocol="chain", cases=8)
    assert bad.status == "deviation" and bad.failure.kind == "exact", bad.summary()


def chain_from_logits(draft_token_ids, logits, draft_probs, rng, temperature, top_k, top_p):
    """The rule on the law an engine samples from logits (otlp's one conversion)."""
    laws = target_laws(logits, temperature, top_k, top_p)
    return chain_rejection(draft_token_ids, laws, draft_probs, rng)


chain_from_logits.logits = True


def chain_ignoring_temperature(
    draft_token_ids, logits, draft_probs, rng, temperature, top_k, top_p
):
    """Lossy: softmax(logits) whatever the temperature."""
    return chain_rejection(draft_token_ids, softmax(logits), draft_probs, rng)


chain_ignoring_temperature.logits = True


def chain_top_p_inclusive(draft_token_ids, logits, draft_probs, rng, temperature, top_k, top_p):
    """Lossy: top-p keeping an entry when the mass *through* it stays within top_p (a classic
    off-by-one that drops the last token of the head)."""
    laws = softmax(logits, temperature[:, None, None])
    order = np.argsort(-laws, axis=-1, kind="stable")
    ranked = np.take_along_axis(laws, order, -1)
    drop = np.cumsum(ranked, axis=-1) > top_p[:, None, None] + 1e-12
    drop[..., 0] = False
    np.put_along_axis(laws, order, np.where(drop, 0.0, ranked), -1)
    laws /= laws.sum(axis=-1, keepdims=True)
    return chain_rejection(draft_token_ids, laws, draft_probs, rng)


chain_top_p_inclusive.logits = True


def test_chain_on_logits_lossless_and_lossy():
    verdict = referee(chain_from_logits, protocol="chain", cases=8)
    assert verdict.status == "lossless" and verdict.exact_cases == 8, verdict.summary()
    for lossy in (chain_ignoring_temperature, chain_top_p_inclusive):
        bad = referee(lossy, protocol="chain", cases=12)
        assert bad.status == "deviation" and bad.failure.kind == "exact", bad.summary()


def test_the_logits_and_sampling_parameters_give_back_the_target():
    """otlp's conversion (target_laws) of the referee's logits, temperatures, top-k and top-p
    is the case's target law, with top-k and top-p restricting something on some cases."""
    truncating = set()
    for case in _chain_cases():
        for tokens, _ in case.drafts():
            p, _ = case.context_laws(tokens)
            logits, sampling = keeping(tokens[None], p[None])
            laws = target_laws(logits, **sampling)
            np.testing.assert_allclose(laws[0], p, atol=1e-12)
            assert 0.5 <= sampling["top_p"][0] <= 1
            if sampling["top_p"][0] < 1:
                truncating.add("top_p")
            if sampling["top_k"][0] < p.shape[1]:
                truncating.add("top_k")
    assert truncating == {"top_p", "top_k"}


def _chain_cases():
    from otlp.referee.generate import CHAIN_SHAPES, tree_cases

    return list(tree_cases(40, "iid", 3, shapes=CHAIN_SHAPES))


def test_otlp_verify_chain_is_a_chain_sampler():
    def otlp_chain(draft_token_ids, target_probs, draft_probs, rng):
        return verify_chain(draft_token_ids, target_probs, draft_probs, rng=rng).output_ids

    # compile the chain walk first: a cold numba cache under load can take longer than the
    # referee's per-call limit (10 s), which would make the verdict an error, not a deviation
    half = np.full((1, 2, 2), 0.5)
    verify_chain(np.zeros((1, 1), dtype=np.int64), half, half[:, :1], rng=0)
    verdict = referee(otlp_chain, protocol="chain", cases=3, epsilon=0.05)
    assert verdict.status == "lossless", verdict.summary()
    assert "stand-in" not in verdict.not_enumerable and "BranchingGenerator" in (
        verdict.not_enumerable
    )


def test_chain_outputs_that_break_the_layout_are_errors():
    def unpadded(draft_token_ids, target_probs, draft_probs, rng):
        out = chain_rejection(draft_token_ids, target_probs, draft_probs, rng)
        return np.where(out < 0, 0, out)

    def wrong_count(draft_token_ids, target_probs, draft_probs, rng):
        out = chain_rejection(draft_token_ids, target_probs, draft_probs, rng)
        return out, np.full(out.shape[0], 7)

    for sampler, said in ((unpadded, "accepted position"), (wrong_count, "num_accepted")):
        verdict = referee(sampler, protocol="chain", cases=4, shapes=("chain2",))
        assert verdict.status == "error" and said in verdict.failure.message, verdict.summary()


def test_a_chain_layout_refuses_tree_shapes():
    with pytest.raises(ValueError, match="shapes: the chain layout takes chains"):
        referee(chain_rejection, protocol="chain", shapes=("root2",))


# --- paths (EAGLE / Medusa) --------------------------------------------------------------


def eagle_paths(candidates, logits, draft_probs, rng, temperature, top_k, top_p):
    """EAGLE's rule (the numpy stand-in), the bonus drawn here from its sample_p."""
    best, length, law = engines.eagle_evaluate_posterior(
        logits, candidates, temperature, top_k, top_p, rng
    )
    return best, length, int(rng.choice(law.shape[0], p=law))


def typical_paths(candidates, logits, draft_probs, rng, temperature, top_k, top_p):
    """Medusa's typical acceptance (lossy by design): the longest path prefix whose tokens each
    hold at least min(0.09, 0.3·exp(-H)) of the target's law."""
    laws = target_laws(logits, temperature, top_k, top_p)
    best, length = 0, 0
    for j in range(candidates.shape[0]):
        n = 0
        while n + 1 < candidates.shape[1] and candidates[j, n + 1] >= 0:
            law = laws[j, n]
            entropy = -np.sum(law[law > 0] * np.log(law[law > 0]))
            if law[candidates[j, n + 1]] < min(0.09, 0.3 * np.exp(-entropy)):
                break
            n += 1
        if n > length:
            best, length = j, n
    return best, length, int(rng.choice(laws.shape[2], p=laws[best, length]))


def test_paths_lossless_and_lossy():
    verdict = referee(eagle_paths, protocol="paths", cases=10)
    assert verdict.status == "lossless" and verdict.exact_cases == 10, verdict.summary()
    assert any("root" in row.label or "tree" in row.label for row in verdict.gap)
    bad = referee(typical_paths, protocol="paths", cases=10)
    assert bad.status == "deviation" and bad.failure.kind == "exact", bad.summary()


def test_paths_with_the_bonus_law_returned():
    def sample_p(candidates, logits, draft_probs, rng, temperature, top_k, top_p):
        laws = target_laws(logits, temperature, top_k, top_p)
        return 0, 0, laws[0, 0]  # accept nothing; the bonus from the root's law

    sample_p.bonus = "referee"
    verdict = referee(sample_p, protocol="paths", cases=6)
    assert verdict.status == "lossless" and verdict.exact_cases == 6, verdict.summary()
    assert "from the law the sampler returned" in verdict.summary()


def test_the_paths_tensors_follow_the_tree():
    parents = np.array([-1, -1, 0, 0, 1])  # root children 0, 1; 0 has 2, 3; 1 has 4
    tree = _Tree(parents)
    assert tree.leaf_paths() == [[0, 2], [0, 3], [1, 4]]
    first, sibling = tree.first_child_next_sibling()
    assert first.tolist() == [1, 3, 5, -1, -1, -1]
    assert sibling.tolist() == [-1, 2, -1, 4, -1, -1]
    seen = {}

    def spy(candidates, logits, draft_probs, rng, temperature, top_k, top_p):
        seen.update(candidates=candidates, logits=logits, draft=draft_probs)
        return 0, 0, 0

    tokens = np.array([[5, 6, 7, 8, 9]])  # sum 35: temperature TEMPERATURES[35 % 3] = 1.6
    p = np.arange(1.0, 7.0)[None, :, None] + np.zeros((1, 6, 10))  # context c holds c + 1
    LayoutSampler(spy, "paths", Generators("numpy"))(tokens, parents, p, p + 100, None)
    assert seen["candidates"].tolist() == [[0, 5, 7], [0, 5, 8], [0, 6, 9]]
    contexts = np.exp(seen["logits"][:, :, 0] / 1.6) - 1  # root 0, node i -> i + 1
    np.testing.assert_allclose(contexts, [[0, 1, 3], [0, 1, 4], [0, 2, 5]])
    assert seen["draft"][:, :, 0].tolist() == [[101, 102], [101, 102], [101, 103]]


# --- SGLang's tree -----------------------------------------------------------------------


def sglang_relaxed(*args):
    """Lossy: SGLang's threshold_acc below 1."""
    return engines.sglang_tree_sampler(*args, threshold_acc=0.7)


def test_sglang_tree_lossless_and_lossy():
    verdict = referee(
        engines.sglang_tree_sampler, protocol="sglang_tree", scheme="without_replacement", cases=10
    )
    assert verdict.status == "lossless" and verdict.exact_cases == 10, verdict.summary()
    bad = referee(sglang_relaxed, protocol="sglang_tree", scheme="without_replacement", cases=10)
    assert bad.status == "deviation" and bad.failure.kind == "exact", bad.summary()
    repeated = referee(engines.sglang_tree_sampler, protocol="sglang_tree", scheme="iid", cases=10)
    assert repeated.status == "deviation", repeated.summary()  # repeated siblings count twice


def test_sglang_outputs_that_are_not_root_paths_are_errors():
    def skips_the_root(*args):
        predicts, accept_index, num = engines.sglang_tree_sampler(*args)
        accept_index[:, 0] = accept_index[:, 1]
        return predicts, accept_index, np.maximum(num, 1)

    verdict = referee(skips_the_root, protocol="sglang_tree", cases=3, shapes=("root2",))
    assert verdict.status == "error" and "accept_index" in verdict.failure.message


# --- transformers' candidate logits ------------------------------------------------------


hf_speculative = engines.transformers_speculative_sampling


def hf_without_residual(
    candidate_input_ids, candidate_logits, candidate_length, new_logits, done, rng
):
    """Lossy: the token after a rejection drawn from p."""
    return hf_speculative(
        candidate_input_ids, candidate_logits * 0 - 700.0, candidate_length, new_logits, done, rng
    )


def test_candidate_logits_lossless_and_lossy():
    verdict = referee(hf_speculative, protocol="candidate_logits", cases=8)
    assert verdict.status == "lossless" and verdict.exact_cases == 8, verdict.summary()
    bad = referee(hf_without_residual, protocol="candidate_logits", cases=8)
    assert bad.status == "deviation" and bad.failure.kind == "exact", bad.summary()


# --- common ------------------------------------------------------------------------------


def test_torch_tensors_are_handed_when_declared():
    torch = pytest.importorskip("torch")

    def torch_chain(draft_token_ids, target_probs, draft_probs, rng):
        assert isinstance(target_probs, torch.Tensor) and target_probs.dtype == torch.float64
        out = chain_rejection(
            draft_token_ids.numpy(), target_probs.numpy(), draft_probs.numpy(), rng
        )
        return torch.from_numpy(out)

    torch_chain.tensors = "torch"
    verdict = referee(torch_chain, protocol="chain", cases=4)
    assert verdict.status == "lossless" and verdict.exact_cases == 4, verdict.summary()


def test_layout_options_are_checked():
    def chain(*args):
        return chain_rejection(*args)

    chain.logits = "yes"
    with pytest.raises(ValueError, match="logits"):
        referee(chain, protocol="chain", cases=1)

    def transformers(*args):
        return hf_speculative(*args)

    transformers.bonus = "referee"
    with pytest.raises(ValueError, match="bonus"):
        referee(transformers, protocol="candidate_logits", cases=1)


def test_every_layout_has_a_docs_example_that_runs(tmp_path, monkeypatch):
    """Each ```python block of docs/referee.md runs; the layouts section shows every layout in
    an example of at most 10 lines of user code."""
    page = (ROOT / "docs" / "referee.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.DOTALL)
    section = page[page.index("## Engines' layouts") : page.index("## The method")]
    examples = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    for layout in LAYOUTS:
        shown = [b for b in examples if f'protocol="{layout}"' in b]
        assert shown, f"no docs example for the {layout} layout"
        code = [ln for ln in shown[0].splitlines() if ln.strip() and not ln.startswith("#")]
        assert len(code) <= 10, f"the {layout} example has {len(code)} lines"
    monkeypatch.chdir(tmp_path)
    for block in blocks:
        exec(compile(block, "docs/referee.md", "exec"), {"__name__": "docs_referee"})


def test_the_cli_offers_every_protocol_and_generator():
    import argparse

    from otlp.commands import referee as command
    from otlp.referee.generators import KINDS
    from otlp.referee.judge import PROTOCOLS

    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    choices = {a.dest: a.choices for a in parser._actions}
    assert tuple(choices["protocol"]) == PROTOCOLS
    assert tuple(choices["rng"]) == KINDS


def test_a_tree_case_list_for_a_chain_layout_is_refused():
    from otlp.referee.generate import tree_cases

    case = next(iter(tree_cases(1, "iid", 0, shapes=("root2",))))
    with pytest.raises(ValueError, match="takes chains"):
        referee(chain_rejection, protocol="chain", cases=[case])
