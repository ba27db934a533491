"""verify_chain in the engines' layouts (vLLM, FlashInfer, SGLang) against otlp's own layout.

Each layout must give the same outcome from the same uniforms as otlp's layout on the same
laws (so the same exact law, which tests/test_verification_tree.py enumerates), and refuse bad
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
        ({"temperature": 1.0, "target_top_k": 2.5}, r"^target_top_k\[0\]: expected an integer"),
        ({"temperature": 1.0, "target_top_p": 0.0}, r"^target_top_p: expected values in \(0, 1\]"),
        ({"target_top_p": 0.5}, r"^target_top_p: the target's top-k/top-p apply to logits"),
        ({"target_top_k": 2}, r"^target_top_k: the target's top-k/top-p apply to logits"),
        ({"temperature": 1.0, "target_top_k": -1}, r"^target_top_k\[0\]: must be at least 0"),
        ({"temperature": 1.0, "target_top_p": 1.5}, r"^target_top_p\[0\]: must be at most 1"),
        ({"temperature": 1.0, "target_top_p": [0.5]}, r"^target_top_p: expected a number or one"),
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


def _on_logits_and_on_laws(tokens, logits, laws, q, seed):
    """verify_chain's output ids (method "rrs", one seed) on ``logits`` with temperature 0.8,
    top-k 4 and top-p 0.9, and on ``laws``, the target laws of those logits."""
    given = verify_chain(
        tokens,
        logits,
        q,
        method="rrs",
        rng=seed,
        temperature=0.8,
        target_top_k=4,
        target_top_p=0.9,
    )
    return given.output_ids, verify_chain(tokens, laws, q, method="rrs", rng=seed).output_ids


def test_bfloat16_logits_with_a_temperature():
    """ml_dtypes bfloat16 logits (as a model returns them) with a temperature, top-k and
    top-p: the law in bfloat16 is the float64 one of the same logits rounded, and verify_chain
    gives the outcome it gives on that law."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(20)
    logits, _, q, tokens = _batch(rng)
    low = logits.astype(ml_dtypes.bfloat16)
    law = target_laws(low, 0.8, 4, 0.9)
    assert law.dtype == ml_dtypes.bfloat16
    want = target_laws(low.astype(np.float64), 0.8, 4, 0.9)
    np.testing.assert_allclose(law.astype(np.float64), want, atol=1e-2)
    for seed in range(5):
        given, ours = _on_logits_and_on_laws(tokens, low, law, q, seed)
        assert np.array_equal(given, ours)
    with pytest.raises(ValueError, match=r"^p: expected a float16, bfloat16, float32 or float64"):
        verify_chain(tokens, logits.astype(np.int64), q, temperature=1.0)


@pytest.mark.parametrize("temperature", [1e-39, 1e-45, 1e-300, 5e-324])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tiny_temperatures_give_the_greedy_limit_without_nan_or_warnings(temperature, dtype):
    """A temperature > 0 however small (subnormal in float32 or float64) on finite logits is
    softmax(logits / temperature) without overflow: one-hot on a unique argmax (what 0, greedy,
    gives), the uniform law on tied maxima, never NaN, no RuntimeWarning."""
    import warnings

    rng = np.random.default_rng(21)
    logits, _, q, tokens = _batch(rng)
    logits = (logits * 1e3).astype(dtype)  # large logits: logits / temperature overflows
    logits[0, 1, :2] = logits[0, 1].max() + 1  # a tie at the maximum (tokens 0 and 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        law = target_laws(logits, temperature, 3, 0.9)
        greedy = target_laws(logits, 0.0)
        assert np.isfinite(law).all()
        np.testing.assert_array_equal(law[1:], greedy[1:])
        np.testing.assert_array_equal(law[0, 1, :2], [0.5, 0.5])
        np.testing.assert_array_equal(greedy[0, 1, :2], [1.0, 0.0])  # 0: lowest id on ties
        for seed in range(3):
            tiny = verify_chain(tokens, logits, q, temperature=temperature, rng=seed)
            at_zero = verify_chain(tokens, logits, q, temperature=0.0, rng=seed)
            assert np.array_equal(tiny.output_ids[1:], at_zero.output_ids[1:])


def test_top_p_is_computed_at_the_visited_contexts_only(monkeypatch):
    """With logits, the target law (its softmax, top-k and top-p) is computed at the contexts
    the verification reads and no others: node by node, a chain row reads contexts
    0..num_accepted; block verification reads the whole drafted path (contexts 0..L - 1) and
    the bonus context L only when every draft is accepted."""
    from otlp.verification import engine_layouts

    computed: list[int] = []
    laws = engine_layouts.Sampling.laws

    def counted(self, b, logits):
        computed.append(logits.shape[0])
        return laws(self, b, logits)

    monkeypatch.setattr(engine_layouts.Sampling, "laws", counted)
    rng = np.random.default_rng(22)
    rows, length, vocab = 16, 6, 300
    logits, _, q, tokens = _batch(rng, rows=rows, length=length, vocab=vocab)
    for method in ("sps", "rrs", "block"):
        computed.clear()
        result = verify_chain(
            tokens, logits, q, method=method, temperature=1.0, target_top_p=0.8, rng=1
        )
        accepted = np.asarray(result.num_accepted)
        if method == "block":
            visited = rows * length + int((accepted == length).sum())
        else:
            visited = int((accepted + 1).sum())
        assert sum(computed) == visited < rows * (length + 1)
        computed.clear()
        law = target_laws(logits, 1.0, None, 0.8)
        assert sum(computed) == rows * (length + 1)
        same = verify_chain(tokens, law, q, method=method, rng=1)
        assert np.array_equal(result.output_ids, same.output_ids)


def test_top_p_head_equals_the_head_of_a_full_sort():
    """The top-p head found among the largest entries (without sorting the row) is the head
    a stable sort of the whole row gives, ties at the cut included, for nuclei small and large."""
    from otlp.verification.engine_layouts import _top_p_head

    rng = np.random.default_rng(23)
    for trial in range(300):
        vocab = int(rng.integers(1, 3000))
        law = rng.dirichlet(np.full(vocab, float(rng.choice([0.01, 0.3, 5.0]))))
        if trial % 3 == 0:  # ties: values from a few levels
            law = rng.choice(law[: max(1, vocab // 50)], size=vocab)
            law /= law.sum()
        top_p = float(rng.choice([0.1, 0.5, 0.9, 0.999, 1 - 1e-12, rng.uniform()]))
        order = np.argsort(-law, kind="stable")
        ranked = law[order]
        want = np.zeros(vocab, dtype=bool)
        want[order[(np.cumsum(ranked) - ranked) < top_p]] = True
        got = law.copy()
        _top_p_head(got, top_p)
        np.testing.assert_array_equal(got != 0, want & (law != 0))
        np.testing.assert_array_equal(got[want], law[want])


def test_ragged_parents_are_refused_naming_parents():
    """One shape per row must be rectangular: rows of different lengths are refused by name
    (not with numpy's message about inhomogeneous shapes)."""
    from otlp.decoding import verify_tree

    p = np.full((2, 4, 3), 1 / 3)
    tokens = np.zeros((2, 3), dtype=np.int64)
    for parents in ([[-1, 0, 1], [-1, 0]], [-1, 0, [1]]):
        with pytest.raises(ValueError, match=r"^parents: rows of different lengths"):
            verify_tree(tokens, parents, p, p, method="sps", rng=0)


# --- the mutation round of engine_layouts.py (issue 39): each test names what it pins ---


def _softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    w = np.exp((logits - logits.max(axis=-1, keepdims=True)) / temperature)
    return w / w.sum(axis=-1, keepdims=True)


def test_without_top_k_or_top_p_the_law_is_the_whole_softmax():
    """No top_k (None) and top_k 0 or >= V restrict nothing; top_k 1 is the argmax; top_k
    V - 1 drops only the smallest entry (the k-th largest found by partition, on a vocabulary
    large enough that partition does not sort)."""
    rng = np.random.default_rng(30)
    logits = rng.normal(size=(2, 3, 1000)) * 2
    want = _softmax(logits, 0.9)
    for top_k in (None, 0, 1000, 5000):
        np.testing.assert_allclose(target_laws(logits, 0.9, top_k), want, rtol=1e-12, atol=0)
    one = target_laws(logits, 0.9, 1)
    np.testing.assert_array_equal(one, np.eye(1000)[np.argmax(logits, axis=-1)])
    most = target_laws(logits, 0.9, 999)
    smallest = np.argmin(logits, axis=-1)
    for b in range(2):
        for i in range(3):
            expect = want[b, i].copy()
            expect[smallest[b, i]] = 0
            np.testing.assert_allclose(most[b, i], expect / expect.sum(), rtol=1e-12, atol=0)
    for top_k in (1, 2, 7, 100):  # the k largest, renormalised
        kept = target_laws(logits, 0.9, top_k) > 0
        assert (kept.sum(axis=-1) == top_k).all()
        ranks = np.argsort(np.argsort(-logits, axis=-1), axis=-1)
        np.testing.assert_array_equal(kept, ranks < top_k)


def test_top_p_cuts_where_the_mass_before_an_entry_reaches_top_p():
    """An entry is kept when the mass ranked before it is strictly below top_p: with binary
    fractions (exact sums), (0.5, 0.25, 0.25) at top_p 0.5 keeps one entry, at 0.5 + 1 ulp two.
    top_p 1 keeps every entry."""
    from otlp.verification.engine_layouts import _top_p_head

    for top_p, kept in ((0.5, [0.5, 0, 0]), (np.nextafter(0.5, 1), [0.5, 0.25, 0])):
        law = np.array([0.5, 0.25, 0.25])
        _top_p_head(law, float(top_p))
        assert law.tolist() == kept
    law = np.array([0.25, 0.5, 0.125, 0.125])
    _top_p_head(law, 0.75)
    assert law.tolist() == [0.25, 0.5, 0, 0]
    logits = np.log(np.array([[[0.5, 0.25, 0.125, 0.125]]]))
    np.testing.assert_allclose(target_laws(logits, 1.0, None, 1.0), np.exp(logits), rtol=1e-12)


def test_top_p_head_with_more_ties_at_the_maximum_than_it_first_ranks():
    """A uniform law over more tokens than the first head (256) ranks: the head is the first
    tokens by id whose preceding mass is below top_p (the tie rule), not an error."""
    from otlp.verification.engine_layouts import _top_p_head

    for vocab, top_p, kept in ((600, 0.5, 300), (1000, 0.9, 900), (300, 0.1, 30)):
        law = np.full(vocab, 1 / vocab)
        _top_p_head(law, top_p)
        assert np.flatnonzero(law).tolist() == list(range(kept)) or (
            np.flatnonzero(law).tolist() == list(range(kept + 1))  # rounding of k / vocab
        )


def test_top_p_head_extends_past_a_first_head_just_short_of_top_p():
    """The first head's mass must exceed top_p by a margin before the search stops: 256
    entries of 1/512 (mass exactly 0.5) at top_p = 0.5 + 1e-15 leave the 257th entry's
    preceding mass (0.5) below top_p, so it belongs to the head although the first 256 do
    not reach top_p by less than the margin."""
    from otlp.verification.engine_layouts import _top_p_head

    law = np.concatenate([np.full(256, 1 / 512), np.full(744, 0.5 / 744)])
    law[256:] *= 1 - np.arange(744) * 1e-6  # distinct, decreasing: no ties at the cut
    law[256:] *= 0.5 / law[256:].sum()
    top_p = 0.5 + 1e-15
    got = law.copy()
    _top_p_head(got, top_p)
    assert np.flatnonzero(got).tolist() == list(range(257))


def test_top_p_head_ranks_only_the_largest_entries_of_a_peaked_row(monkeypatch):
    """Without sorting the whole row: on V = 50,000 where 200 tokens hold 0.99 of the mass,
    top_p = 0.9 sorts the first head of 256 entries only (this is what keeps top-p at
    V = 128,256 cheap)."""
    from otlp.verification.engine_layouts import _HEAD, _top_p_head

    rng = np.random.default_rng(31)
    vocab = 50_000
    law = rng.uniform(0.5, 1.0, size=vocab) * (0.01 / (vocab - 200)) / 0.75
    top = rng.choice(vocab, size=200, replace=False)
    law[top] = rng.uniform(0.9, 1.1, size=200) * 0.99 / 200
    law /= law.sum()
    want = law.copy()
    order = np.argsort(-want, kind="stable")
    keep = np.zeros(vocab, dtype=bool)
    keep[order[(np.cumsum(want[order]) - want[order]) < 0.9]] = True
    want[~keep] = 0
    sizes: list[int] = []
    argsort = np.argsort

    def counted(a, *args, **kwargs):
        sizes.append(np.shape(a)[-1])
        return argsort(a, *args, **kwargs)

    monkeypatch.setattr(np, "argsort", counted)
    _top_p_head(law, 0.9)
    monkeypatch.undo()
    np.testing.assert_array_equal(law, want)
    assert sizes and max(sizes) <= _HEAD


def test_non_finite_logits_are_refused_by_row_and_context_without_warnings():
    """+inf logits make a NaN law (inf - inf): refused naming p's row and context, with no
    numpy RuntimeWarning on the way (warnings are errors here)."""
    import warnings

    logits = np.zeros((2, 3, 4))
    logits[1, 1, 2] = np.inf
    q = np.full((2, 3, 4), 0.25)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(target_laws(logits, 1.0)[1, 1]).all()
        with pytest.raises(ValueError, match=r"^p\[1, 1\]: has a negative, NaN or infinite"):
            verify_chain(np.zeros((2, 2), dtype=np.int64), logits, q, temperature=1.0, rng=0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"temperature": "hot"}, r"^temperature: expected a number or one per row, got 'hot'"),
        ({"temperature": [[1.0]]}, r"^temperature: expected a number or one per row \(2\)"),
        ({"top_k": 2.5}, r"^top_k\[0\]: expected an integer, got 2.5"),
        ({"top_k": [1, -1]}, r"^top_k\[1\]: must be at least 0"),
        ({"top_p": -0.5}, r"^top_p\[0\]: must be at least 0"),
        ({"top_p": 0.0}, r"^top_p: expected values in \(0, 1\]"),
        ({"top_p": [0.5, 1.5]}, r"^top_p\[1\]: must be at most 1"),
    ],
)
def test_target_laws_errors_name_its_own_arguments(kwargs, match):
    """target_laws' arguments are top_k and top_p (verify_chain's are target_top_k and
    target_top_p): each error names the argument of the function called."""
    logits = np.zeros((2, 3, 4))
    args = {"temperature": 1.0} | kwargs
    with pytest.raises(ValueError, match=match):
        target_laws(logits, **args)


def test_logits_of_the_wrong_shape_are_refused_naming_p():
    for shape in ((3, 4), (1, 2, 3, 4)):
        with pytest.raises(ValueError, match=r"^p: expected logits of shape \(B, L \+ 1, V\), got"):
            target_laws(np.zeros(shape), 1.0)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_torch_logits_give_laws_in_their_dtype_and_the_same_outcome(dtype):
    """Torch logits of any floating dtype: target_laws returns the laws as a tensor of the
    logits' dtype, equal to the float64 laws rounded to it, and verify_chain on the logits
    (laws computed lazily at the visited contexts) gives the outcome it gives on those laws."""
    rng = np.random.default_rng(32)
    logits, _, q, tokens = _batch(rng)
    low = torch.from_numpy(logits).to(getattr(torch, dtype))
    law = target_laws(low, 0.8, 4, 0.9)
    assert isinstance(law, torch.Tensor) and law.dtype == low.dtype
    want = target_laws(low.to(torch.float64), 0.8, 4, 0.9)
    assert torch.equal(law, want.to(low.dtype))
    for seed in range(3):
        given, ours = _on_logits_and_on_laws(tokens, low, law, q, seed)
        assert torch.equal(torch.as_tensor(given), torch.as_tensor(ours))


@pytest.mark.parametrize(
    ("dtype", "row_dtype"),
    [("float16", np.float32), ("float32", np.float32), ("float64", np.float64)],
)
def test_lazy_rows_are_the_target_laws_rounded_to_the_logits_dtype(dtype, row_dtype):
    """LogitLaws.row gives a context's law as target_laws returns it (rounded to the logits'
    dtype), 16-bit dtypes widened exactly to float32 for the row kernels; numpy and torch
    logits alike, each context computed once."""
    from otlp.verification.engine_layouts import LogitLaws

    rng = np.random.default_rng(33)
    logits = (rng.normal(size=(2, 3, 7)) * 2).astype(dtype)
    full = target_laws(logits, 0.7, 5, 0.8)
    for given in (logits, torch.from_numpy(logits)):
        laws = LogitLaws(given, 0.7, 5, 0.8)
        for b in range(2):
            for c in range(3):
                row = laws.row(b, c)
                assert isinstance(row, np.ndarray) and row.dtype == row_dtype
                np.testing.assert_array_equal(row, full[b, c].astype(row_dtype))
                assert laws.row(b, c) is row  # kept for the call
