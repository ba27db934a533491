"""Every rule at the first step of a prompt (otlp.decoding.first_step) and the memoised tree
model it runs on (otlp.decoding.models.memo).

* On a toy Markov pair (the kind ``otlp decode --model toy`` runs), each rule's Monte Carlo
  block efficiency agrees with its exact value (``rule_block_efficiency``: every drafted tree
  weighed by its probability) within 4 standard errors, for 2 paths and a 2-ary tree, i.i.d.
  and without replacement, and stays below the scalable bound on the optimum.
* Common random numbers: a rule's emitted counts do not depend on the other rules measured
  with it nor on the trees per model call; verifying each tree several times averages its
  counts and shrinks the standard error of a difference between rules.
* The memo returns the wrapped model's laws (toy models, and a tiny random Llama through its
  KV cache), evaluates each prefix once, restricts to the top k when asked, and survives
  evictions and reopened sessions.
"""

from __future__ import annotations

import numpy as np
import pytest

from otlp.decoding.first_step import measure_first_step
from otlp.decoding.models.memo import MemoizedTreeLM
from otlp.decoding.models.prefix import PrefixLM
from otlp.limits import limited
from otlp.multistep import block_efficiency_bound, model_pair
from otlp.verification import rule_block_efficiency
from otlp.verification.drafting import restrict_top_k
from otlp.verification.rule_table import RULES
from otlp.verification.shapes import k_ary_tree, path_tree
from tests.tiny_models import tiny_causal_lm

PROMPT = (1,)
SAMPLES = 1000
Z = 4.0


@pytest.fixture(scope="module")
def toy() -> tuple[object, object]:
    # seed 2: speculative sampling, RRS and K-SEQ differ here (on some seeds SpS equals RRS)
    return model_pair("markov", 3, seed=2, distance=0.9)


CELLS = [
    ("paths2", "iid", path_tree(2, 2), 2, ()),
    ("paths2", "without_replacement", path_tree(2, 2), 2, ()),
    ("kary2", "iid", k_ary_tree((2, 2)), 1, (2, 2)),
    ("kary2", "without_replacement", k_ary_tree((2, 2)), 1, (2, 2)),
]


@pytest.mark.parametrize(("shape", "scheme", "parents", "paths", "branching"), CELLS)
def test_first_step_agrees_with_the_exact_block_efficiency(
    toy: tuple[object, object],
    shape: str,
    scheme: str,
    parents: np.ndarray,
    paths: int,
    branching: tuple[int, ...],
) -> None:
    target, draft = toy
    methods = [
        m for m, rule in RULES.items() if scheme in rule.schemes and rule.verifies(paths, branching)
    ]
    assert "traversal_verification" in methods and "maxflow_cs" in methods
    tgt, dft = MemoizedTreeLM(PrefixLM(target)), MemoizedTreeLM(PrefixLM(draft))
    result = measure_first_step(tgt, dft, PROMPT, parents, methods, scheme=scheme, samples=SAMPLES)
    assert not result.refused
    bound = block_efficiency_bound(target, draft, 2, shape, scheme, context=PROMPT)
    for method in methods:
        exact = rule_block_efficiency(
            target, draft, 2, method, shape=shape, scheme=scheme, context=PROMPT
        )
        mean, se = result.mean(method), result.se(method)
        assert 0 < se < 0.05
        assert abs(mean - exact) < Z * se, (method, mean, se, exact)
        assert mean < bound.block_efficiency + Z * se
    # each prefix evaluated once: the target after at most 1 + 3 + 9 prefixes, the draft 1 + 3
    assert tgt.evaluated <= 13 and dft.evaluated <= 4


def test_rules_share_the_trees_whatever_else_runs(toy: tuple[object, object]) -> None:
    target, draft = toy
    parents = k_ary_tree((2, 2))
    tgt, dft = MemoizedTreeLM(PrefixLM(target)), MemoizedTreeLM(PrefixLM(draft))
    both = measure_first_step(
        tgt, dft, PROMPT, parents, ["sps", "rrs"], samples=50, chunk=7, seed=3
    )
    alone = measure_first_step(tgt, dft, PROMPT, parents, ["rrs"], samples=50, chunk=64, seed=3)
    other = measure_first_step(tgt, dft, PROMPT, parents, ["rrs"], samples=50, chunk=64, seed=4)
    assert np.array_equal(both.emitted["rrs"], alone.emitted["rrs"])
    assert not np.array_equal(alone.emitted["rrs"], other.emitted["rrs"])
    diff, se = both.difference("rrs", "sps")
    assert diff == pytest.approx(both.mean("rrs") - both.mean("sps"))
    assert se >= 0 and (both.emitted["rrs"] >= both.emitted["sps"]).mean() > 0.5


def test_repeated_verifications_average_and_sharpen_the_differences(
    toy: tuple[object, object],
) -> None:
    target, draft = toy
    tgt, dft = MemoizedTreeLM(PrefixLM(target)), MemoizedTreeLM(PrefixLM(draft))
    rules = ["rrs", "partial_resolution", "traversal_verification"]
    parents = k_ary_tree((2, 2))
    once = measure_first_step(tgt, dft, PROMPT, parents, rules, samples=400)
    often = measure_first_step(tgt, dft, PROMPT, parents, rules, samples=400, repeats=4)
    for rule in rules:
        exact = rule_block_efficiency(target, draft, 2, rule, shape="kary2", context=PROMPT)
        assert abs(often.mean(rule) - exact) < Z * often.se(rule)
        counts = 4 * often.emitted[rule]
        assert np.array_equal(counts, np.round(counts)) and counts.min() >= 4
    assert once.samples == often.samples == 400 and often.repeats == 4
    # on a chain Traversal Verification is block verification tree by tree (its Theorem): the
    # difference is the verifications' own noise, which 4 repeats halve
    chain, pair = path_tree(1, 2), ["traversal_verification", "block"]
    once = measure_first_step(tgt, dft, PROMPT, chain, pair, samples=400)
    often = measure_first_step(tgt, dft, PROMPT, chain, pair, samples=400, repeats=4)
    assert often.difference(*pair)[1] < 0.6 * once.difference(*pair)[1]


def test_a_rule_over_the_size_limits_is_refused_not_dropped_on_some_trees(
    toy: tuple[object, object],
) -> None:
    target, draft = toy
    tgt, dft = MemoizedTreeLM(PrefixLM(target)), MemoizedTreeLM(PrefixLM(draft))
    with limited(max_operations=1):
        result = measure_first_step(
            tgt, dft, PROMPT, path_tree(2, 2), ["sps", "maxflow_cs"], samples=20, chunk=4
        )
    assert set(result.emitted) == {"sps"}
    assert "maxflow_cs" in result.refused


def _paths(rng: np.random.Generator, vocab: int, count: int) -> list[tuple[int, ...]]:
    return [tuple(int(t) for t in rng.integers(0, vocab, rng.integers(0, 4))) for _ in range(count)]


@pytest.mark.parametrize(("capacity", "max_nodes"), [(1024, 1024), (3, 1024), (1024, 4)])
def test_memo_returns_the_models_laws(capacity: int, max_nodes: int) -> None:
    # a law of the last three tokens: a node fed below the wrong parent gets the wrong law
    target, _ = model_pair("ngram", 3, seed=0, context=3)
    model = PrefixLM(target, temperature=0.7)
    memo = MemoizedTreeLM(model, capacity=capacity, max_nodes=max_nodes)
    rng = np.random.default_rng(0)
    for context in [(0,), (2, 1), (0,)]:
        for _ in range(4):
            paths = _paths(rng, 3, 6)
            want = model.laws([list(context + path) for path in paths])
            assert np.abs(memo.laws(context, paths) - want).max() < 1e-14


def test_memo_evaluates_each_prefix_once_and_batches_the_rows(
    toy: tuple[object, object],
) -> None:
    target, _ = toy
    memo = MemoizedTreeLM(PrefixLM(target))
    session = memo.session([[0, 1]] * 3)
    tokens = np.array([[2, 1, 0], [2, 2, 0], [2, 1, 0]])
    laws = session.forward(tokens, np.array([-1, 0, 1]), np.arange(3))
    assert memo.calls == 2 and memo.evaluated == 1 + 5  # the root, then one tree of 5 nodes
    assert np.array_equal(laws[0], laws[2])
    again = memo.session([[0, 1]]).forward(tokens[1:2], np.array([-1, 0, 1]), np.zeros(1, int))
    assert memo.calls == 2 and np.array_equal(again[0], laws[1])
    # an absent node (and below it) gets the root's law; the present ones their own
    out = memo.session([[0, 1]]).forward(np.array([[2, -1, 0]]), np.array([-1, -1, 1]), [0])
    assert np.array_equal(out[0, 2], out[0, 0]) and np.array_equal(out[0, 3], out[0, 0])
    assert np.array_equal(out[0, 1], laws[0, 1])


def test_memo_restricts_to_the_top_k() -> None:
    target, _ = model_pair("markov", 6, seed=1, distance=0.5)
    model = PrefixLM(target)
    memo = MemoizedTreeLM(model, top_k=2)
    laws = memo.laws((3,), [(), (1,), (1, 4)])
    want = restrict_top_k(model.laws([[3], [3, 1], [3, 1, 4]]), 2)
    assert np.abs(laws - want).max() < 1e-15
    assert (np.count_nonzero(laws, axis=1) == 2).all()


def test_memo_feeds_a_kv_cached_model_its_ancestors_first() -> None:
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from otlp.decoding.models.hf import HFTreeLM

    model = HFTreeLM(
        tiny_causal_lm(
            transformers.LlamaForCausalLM, vocab=20, width=16, layers=2, heads=2, positions=64
        )
    )
    memo = MemoizedTreeLM(model, capacity=4, max_nodes=6)
    rng = np.random.default_rng(1)
    for _ in range(5):
        paths = _paths(rng, 20, 5)
        for path, law in zip(paths, memo.laws((3, 7), paths), strict=True):
            want = model.prefix_laws(np.array([[3, 7, *path]]))[0]
            assert np.abs(law - want).max() < 1e-5
