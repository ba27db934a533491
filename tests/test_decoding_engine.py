"""The decode loop on toy models: block efficiency against the exact expectation, the law of
the generated tokens against the target's, greedy decoding, accounting, bounded memory."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from scipy import stats

from otlp.decoding.loop import Speculation, decode
from otlp.decoding.models import Memoized, PrefixLM
from otlp.multistep.exact import expected_accepted
from otlp.multistep.models import model_pair
from otlp.verification.shapes import k_ary_tree

# (engine method, K, L) -> the exact law of one call in otlp.multistep.exact.
EXACT = {
    ("sps", 1, 3): ("token", {}),
    ("block", 1, 3): ("block", {}),
    ("gbv", 2, 2): ("gbv", {}),
    ("rrs", 3, 2): ("spectr", {"rule": "rrs"}),
    ("kseq", 2, 2): ("spectr", {"rule": "kseq"}),
    ("maxflow_cs", 2, 2): ("spectr", {"rule": "ot"}),
}


def pair(kind: str = "context-free", vocab: int = 4, seed: int = 3) -> tuple[PrefixLM, PrefixLM]:
    target, draft = model_pair(kind, vocab, seed=seed, distance=0.6)
    return PrefixLM(target), PrefixLM(draft)


def raw_pair(kind: str = "context-free", vocab: int = 4, seed: int = 3) -> tuple:
    return model_pair(kind, vocab, seed=seed, distance=0.6)


@pytest.mark.parametrize(("method", "paths", "depth"), list(EXACT))
def test_block_efficiency_matches_the_exact_expectation(method: str, paths: int, depth: int):
    # Context-free models: every step has the same law, so the mean over steps estimates the
    # exact per-call expectation of otlp.multistep.exact.
    raw_target, raw_draft = raw_pair()
    result = decode(
        PrefixLM(raw_target),
        PrefixLM(raw_draft),
        [[]] * 300,
        Speculation.paths(method, paths, depth),
        max_new_tokens=12,
        seed=5,
    )
    name, options = EXACT[(method, paths, depth)]
    exact = 1 + expected_accepted(raw_target, raw_draft, depth, name, paths, **options)
    se = result.block_efficiency_se
    assert abs(result.block_efficiency - exact) <= 2.5 * se, (result.block_efficiency, exact, se)
    assert 0 < se < 0.05


@pytest.mark.parametrize(
    ("method", "tree"),
    [
        ("sps", (1, 1)),
        ("rrs", (2, 1)),
        ("rrs_without_replacement", (2, 2)),
        ("spechub", (2, 1)),
        ("gbv", None),
        ("block", None),
    ],
)
def test_first_tokens_follow_the_target(method: str, tree: tuple[int, ...] | None):
    # Markov models: the first three generated tokens of 2000 rows against the target's law.
    vocab = 3
    target, draft = pair("markov", vocab, seed=11)
    spec = (
        Speculation(method, k_ary_tree(tree))
        if tree is not None
        else Speculation.paths(method, 2 if method == "gbv" else 1, 2)
    )
    result = decode(target, draft, [[0]] * 2000, spec, max_new_tokens=3, seed=7)
    seqs = np.array(result.tokens)
    index = seqs @ vocab ** np.arange(2, -1, -1)
    observed = np.bincount(index, minlength=vocab**3)
    expected = np.zeros(vocab**3)
    for code in range(vocab**3):
        a, b, c = np.unravel_index(code, (vocab,) * 3)
        expected[code] = (
            target.laws([[0]])[0, a] * target.laws([[0, a]])[0, b] * target.laws([[0, a, b]])[0, c]
        )
    _, pvalue = stats.chisquare(observed, expected * len(seqs))
    assert pvalue > 1e-3


def test_a_biased_verifier_is_caught_by_the_law_check(monkeypatch: pytest.MonkeyPatch):
    # The check above can fail: accepting every draft outputs the draft's law, not the target's.
    import otlp.verification.tree as verify

    original = verify.verify_tree

    def accept_all(tokens, parents, p, q, **kw):  # type: ignore[no-untyped-def]
        return original(tokens, parents, q, q, **kw)

    monkeypatch.setattr(verify, "verify_tree", accept_all)
    with pytest.raises(AssertionError):
        test_first_tokens_follow_the_target("sps", (1, 1))


@pytest.mark.parametrize("method", ["sps", "rrs", "gbv", "global_resolution", "maxflow_cs"])
def test_greedy_decoding_reproduces_the_target_argmax_chain(method: str):
    target, draft = model_pair("ngram", 5, seed=2, distance=0.7)
    greedy_target = PrefixLM(target, temperature=0.0)
    greedy_draft = PrefixLM(draft, temperature=0.0)
    prompts = [[1], [2, 3], [4]]
    ar = decode(greedy_target, None, prompts, Speculation.autoregressive(), max_new_tokens=20)
    spec = Speculation.paths(method, 1 if method in {"sps", "block"} else 2, 3)
    out = decode(greedy_target, greedy_draft, prompts, spec, max_new_tokens=20, seed=1)
    assert out.tokens == ar.tokens
    assert out.block_efficiency > 1.0


def test_rows_do_not_depend_on_their_batch():
    target, draft = pair("markov", 4)
    spec = Speculation.paths("rrs", 2, 3)
    alone = decode(target, draft, [[1]], spec, max_new_tokens=15, seed=[42])
    batch = decode(target, draft, [[2], [1], [3]], spec, max_new_tokens=15, seed=[1, 42, 3])
    assert batch.tokens[1] == alone.tokens[0]


def test_stop_tokens_and_length_limit():
    target, draft = pair("markov", 4)
    result = decode(
        target,
        draft,
        [[0]] * 20,
        Speculation.paths("sps", 1, 4),
        max_new_tokens=9,
        seed=0,
        stop_tokens=[2],
    )
    for tokens in result.tokens:
        assert 1 <= len(tokens) <= 9
        assert 2 not in tokens[:-1]
        assert tokens[-1] == 2 or len(tokens) == 9


def test_accounting_adds_up():
    target, draft = pair("markov", 4)
    result = decode(target, draft, [[0]] * 4, Speculation.paths("gbv", 2, 3), max_new_tokens=30)
    emitted = result.emitted()
    assert emitted.sum() >= result.generated  # the last step may emit past the limit
    assert result.target_calls == len(result.steps)
    assert np.all((emitted >= 1) & (emitted <= 4))
    parts = result.draft_s + result.target_s + result.verify_s
    assert 0 < parts <= result.wall_s
    assert 0 < result.verify_share < 1


def test_memory_is_flat_over_a_long_decode():
    # V = 300 Markov models: every step verifies new (p, q) rows of 2.4 kB each, so a cache
    # that kept one law per step would grow by more than 1 kB per token.
    target, draft = pair("markov", 300)
    spec = Speculation.paths("global_resolution", 2, 2)
    decode(target, draft, [[0]], spec, max_new_tokens=100)  # warm up numba and caches
    tracemalloc.start()
    decode(target, draft, [[0]], spec, max_new_tokens=500)
    short = tracemalloc.get_traced_memory()[1]
    tracemalloc.reset_peak()
    decode(target, draft, [[0]], spec, max_new_tokens=2500)
    long = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # Only the tokens and the per-step records grow (a few hundred bytes per token).
    assert (long - short) / 2000 < 600, (short, long)


def test_memoized_prefix_function_evaluates_each_prefix_once():
    target, _ = model_pair("tree", 3, depth=3, seed=0)
    calls = []

    def counted(prefixes: np.ndarray) -> np.ndarray:
        calls.append(len(prefixes))
        return target.batch(prefixes)

    memo = Memoized(counted)
    model = PrefixLM(memo, vocab_size=3)
    model.laws([[0, 1], [0, 1], [2, 2]])
    model.laws([[0, 1]])
    assert sum(calls) == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"speculation": Speculation("nope", np.array([-1]))}, "method"),
        ({"speculation": Speculation("sps", np.array([0]))}, "parents"),
        ({"speculation": Speculation("rrs", np.array([-1]), scheme="spechub")}, "scheme"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"seed": [1, 2, 3]}, "seed"),
        ({"prompts": []}, "prompts"),
        ({"prompts": [[0], [4]]}, r"prompts\[1\]\[0\]: token id 4 outside \[0, 4\)"),
        ({"stop_tokens": [-1]}, r"stop_tokens\[0\]"),
        ({"seed": -1}, "seed"),
        ({"speculation": "sps"}, "speculation: expected a Speculation"),
        ({"speculation": Speculation("sps", np.array([0]))}, r"speculation\.parents\[0\]"),
    ],
)
def test_bad_input_names_the_argument(kwargs: dict, message: str):
    target, draft = pair()
    args = {"prompts": [[0], [1]], "speculation": Speculation.paths("sps", 1, 2), **kwargs}
    with pytest.raises(ValueError, match=message):
        decode(target, draft, **args)


def test_draft_vocabulary_must_match():
    target, _ = pair(vocab=4)
    _, other = pair(vocab=5)
    with pytest.raises(ValueError, match="draft"):
        decode(target, other, [[0]], Speculation.paths("sps", 1, 2))


def test_prompt_lookup_drafts_what_followed_the_last_ngram():
    from otlp.decoding.models.lookup import PromptLookup, lookup

    assert lookup([1, 2, 3, 9, 1, 2], 3) == 3
    assert lookup([4, 1, 2, 7, 1, 2, 5, 2], 3) == 5  # longest recurring suffix: "2" -> 5
    assert lookup([5, 6, 7], 2) is None
    laws = PromptLookup(10).batch(np.array([[1, 2, 3, 1, 2], [1, 2, 3, 4, 5]]))
    assert laws[0, 3] == 1.0 and np.allclose(laws[1], 0.1)


def test_prompt_lookup_draft_keeps_greedy_decoding_exact():
    from otlp.decoding.models.lookup import PromptLookup

    target, _ = model_pair("markov", 4, seed=5, distance=0.5)
    greedy = PrefixLM(target, temperature=0.0)
    draft = PrefixLM(PromptLookup(4), temperature=0.0)
    ar = decode(greedy, None, [[0, 1]], Speculation.autoregressive(), max_new_tokens=30)
    out = decode(greedy, draft, [[0, 1]], Speculation.paths("sps", 1, 4), max_new_tokens=30)
    assert out.tokens == ar.tokens
    assert out.block_efficiency > 2.0  # a greedy Markov chain cycles: lookup finds it
