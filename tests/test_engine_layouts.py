"""verify_chain in the engines' layouts (vLLM, FlashInfer, SGLang) against otlp's own layout.

Each layout must give the same outcome from the same uniforms as otlp's layout on the same
laws (so the same exact law, which tests/test_decoding_verify.py enumerates), and refuse bad
shapes and values naming the argument.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from otlp.decoding import outcome_law, verify_chain
from otlp.verification.engine_layouts import PLACEHOLDER_TOKEN_ID, target_laws
from otlp.verification.shapes import chain

METHODS = ("sps", "rrs", "block", "kseq")


def _batch(rng: np.random.Generator, rows: int = 5, length: int = 3, vocab: int = 6):
    logits = rng.normal(size=(rows, length + 1, vocab)) * 2
    p = np.exp(logits) / np.exp(logits).sum(axis=-1, keepdims=True)
    q = rng.dirichlet(np.full(vocab, 0.7), size=(rows, length + 1))
    tokens = np.array([[rng.choice(vocab, p=q[b, i]) for i in range(length)] for b in range(rows)])
    return logits, p, q, tokens


@pytest.mark.parametrize("method", METHODS)
def test_draft_rows_without_the_bonus_position_give_the_same_outcome(method):
    rng = np.random.default_rng(0)
    for seed in range(10):
        _, p, q, tokens = _batch(rng)
        ours = verify_chain(tokens, p, q, method=method, rng=seed)
        engine = verify_chain(tokens, p, q[:, :-1], method=method, rng=seed)
        assert np.array_equal(ours.output_ids, engine.output_ids)
        q_nan = q.copy()
        q_nan[:, -1] = np.nan  # a draft row at the bonus position is never read
        assert np.array_equal(
            verify_chain(tokens, p, q_nan, method=method, rng=seed).output_ids, ours.output_ids
        )


def test_output_ids_are_the_emitted_tokens_padded_with_the_placeholder():
    rng = np.random.default_rng(1)
    _, p, q, tokens = _batch(rng, rows=40)
    result = verify_chain(tokens, p, q[:, :-1], method="sps", rng=3)
    assert result.output_ids.shape == (40, 4)
    for b in range(40):
        emitted = result.tokens_out(b)
        count = int(result.num_accepted[b])
        assert result.output_ids[b, : count + 1].tolist() == emitted.tolist()
        assert (result.output_ids[b, count + 1 :] == PLACEHOLDER_TOKEN_ID).all()
    assert len(set(result.num_accepted.tolist())) > 1  # rows stop at different places


@pytest.mark.parametrize("method", ["sps", "block"])
def test_logits_with_temperature_top_k_top_p_equal_the_law_they_define(method):
    rng = np.random.default_rng(2)
    logits, _, q, tokens = _batch(rng)
    temperature = np.array([0.7, 1.0, 1.3, 0.0, 2.0])
    top_k, top_p = np.array([0, 3, 4, 2, 6]), np.array([1.0, 0.9, 0.8, 1.0, 0.6])
    law = target_laws(logits, temperature, top_k, top_p)
    for b in range(5):  # the definition, row by row
        for i in range(4):
            if temperature[b] == 0:
                want = np.eye(6)[np.argmax(logits[b, i])]
            else:
                w = np.exp(logits[b, i] / temperature[b])
                w /= w.sum()
                if 0 < top_k[b] < 6:
                    w = np.where(w >= np.sort(w)[-top_k[b]], w, 0)
                    w /= w.sum()
                order = np.argsort(-w, kind="stable")
                keep = (np.cumsum(w[order]) - w[order]) < top_p[b]
                w[order[~keep]] = 0
                want = w / w.sum()
            np.testing.assert_allclose(law[b, i], want, atol=1e-12)
    for seed in range(5):
        given = verify_chain(
            tokens,
            logits,
            q[:, :-1],
            method=method,
            rng=seed,
            temperature=temperature,
            target_top_k=top_k,
            target_top_p=top_p,
        )
        ours = verify_chain(tokens, law, q, method=method, rng=seed)
        assert np.array_equal(given.output_ids, ours.output_ids)
    for b in range(5):  # the exact law follows the target law (enumeration)
        exact = outcome_law(tokens[b], chain(3), law[b], q[b], method=method)
        assert abs(sum(exact.values()) - 1) < 1e-12


def test_torch_inputs_and_generators_per_row():
    rng = np.random.default_rng(3)
    logits, p, q, tokens = _batch(rng)
    pt, qt, tt = (torch.from_numpy(x) for x in (p, q[:, :-1], tokens))
    as_list = [torch.Generator().manual_seed(10 + b) for b in range(5)]
    as_dict = {b: torch.Generator().manual_seed(10 + b) for b in range(5)}
    first = verify_chain(tt, pt, qt, method="rrs", rng=as_list)
    second = verify_chain(tt, pt, qt, method="rrs", rng=as_dict)
    assert isinstance(first.output_ids, torch.Tensor)
    assert torch.equal(first.output_ids, second.output_ids)
    # a row's outcome depends on its own generator only
    alone = verify_chain(
        tt[2:3], pt[2:3], qt[2:3], method="rrs", rng={0: torch.Generator().manual_seed(12)}
    )
    assert torch.equal(alone.output_ids[0], first.output_ids[2])
    one = [
        verify_chain(tt, pt, qt, method="rrs", rng=torch.Generator().manual_seed(5)) for _ in "ab"
    ]
    assert torch.equal(one[0].output_ids, one[1].output_ids)  # one generator for the batch
    law = target_laws(torch.from_numpy(logits), 0.8, 3, 0.9)
    np.testing.assert_allclose(law.numpy(), target_laws(logits, 0.8, 3, 0.9), atol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"q": np.full((5, 2, 6), 1 / 6)}, r"^q: expected shape \(B, N \+ 1, V\)"),
        ({"temperature": -1.0}, r"^temperature\[0\]: must be at least 0"),
        ({"temperature": [1.0, 2.0]}, r"^temperature: expected a number or one per row \(5\)"),
        ({"temperature": 1.0, "target_top_k": 2.5}, r"^top_k\[0\]: expected an integer"),
        ({"temperature": 1.0, "target_top_p": 0.0}, r"^top_p: expected values in \(0, 1\]"),
        ({"target_top_p": 0.5}, r"^target_top_k: the target's top-k/top-p apply to logits"),
        ({"rng": {7: 1}}, r"^rng: keys must be row indices in \[0, 5\)"),
    ],
)
def test_bad_engine_inputs_name_the_argument(kwargs, match):
    _, p, q, tokens = _batch(np.random.default_rng(4))
    args = {"q": q[:, :-1]} | kwargs
    with pytest.raises(ValueError, match=match):
        verify_chain(tokens, p, args.pop("q"), method="sps", **args)


@pytest.mark.parametrize("method", ["sps", "rrs", "kseq", "gbv"])
def test_a_tree_shape_per_row_gives_each_row_its_own_outcome(method):
    """parents (B, N): each row is verified on its own tree shape, with the outcome it gets
    alone (same per-row seed); output_ids are padded to the deepest shape; a bad row is named
    by its index in the batch."""
    from otlp.decoding import chain, path_tree, sample_children, verify_tree
    from otlp.verification import shapes

    rng = np.random.default_rng(14)
    forms = [path_tree(2, 2), chain(4), path_tree(4, 1), path_tree(2, 2), chain(4)]
    if method != "gbv":
        forms[2] = np.array([-1, 0, 0, 1])
    rows, vocab = len(forms), 5
    p = rng.dirichlet(np.full(vocab, 0.6), size=(rows, 5))
    q = rng.dirichlet(np.full(vocab, 0.6), size=(rows, 5))
    tokens = np.zeros((rows, 4), dtype=np.int64)
    for b, form in enumerate(forms):
        for context, kids in enumerate(shapes.children(form)):
            if kids.shape[0]:
                tokens[b, kids] = sample_children(q[b : b + 1, context], kids.shape[0], "iid", rng)
    seeds = list(range(40, 40 + rows))
    batch = verify_tree(tokens, np.stack(forms), p, q, method=method, rng=seeds)
    assert batch.output_ids.shape == (rows, 5)
    for b, form in enumerate(forms):
        alone = verify_tree(
            tokens[b : b + 1], form, p[b : b + 1], q[b : b + 1], method=method, rng=[seeds[b]]
        )
        assert batch.tokens_out(b).tolist() == alone.tokens_out(0).tolist()
        depth = alone.path_nodes.shape[1]
        assert batch.path_nodes[b, :depth].tolist() == alone.path_nodes[0].tolist()
    bad = p.copy()
    bad[3, 0, 1] = -0.2
    with pytest.raises(ValueError, match=r"^p\[3, 0\]: has a negative"):
        verify_tree(tokens, np.stack(forms), bad, q, method=method, rng=seeds)
    with pytest.raises(ValueError, match=r"parents: expected shape \(N,\) or \(B = 5, N\)"):
        verify_tree(tokens, np.stack(forms[:2]), p, q, method=method, rng=seeds)
