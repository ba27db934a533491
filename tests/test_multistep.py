"""Multi-step verification: models, exact laws, target-matching, GBV's skewed draft, Monte Carlo.

The block-verification and GBV formulas were reconstructed ([GBV]'s equations did not survive
its text export);
the target-matching and brute-force checks here are what confirms them.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otlp.cli import main
from otlp.multistep import (
    MODEL_KINDS,
    RANKINGS,
    NGramModel,
    PlanVerifier,
    TabularModel,
    expected_accepted,
    markov_model,
    model_pair,
    output_distribution,
    output_law,
    simulate,
    single_path,
    skewed_table,
    tabulate,
    target_distribution,
)
from otlp.multistep.gbv import path_rank_keys, skewed_conditionals, skewed_law, tree_order
from otlp.multistep.law import single_path_law
from otlp.multistep.models import prefix_digits
from tests.strategies import model_pairs

EXACT = 1e-12


# ----- models ---------------------------------------------------------------------------
def test_ngram_pads_short_prefixes_with_bos() -> None:
    init = np.array([0.2, 0.8])
    trans = np.array([[0.5, 0.5], [0.1, 0.9]])
    chain = markov_model(init, trans)
    np.testing.assert_array_equal(chain(()), init)
    np.testing.assert_array_equal(chain((0, 1)), trans[1])
    np.testing.assert_array_equal(chain.batch(np.array([[1], [0]])), trans[[1, 0]])
    free = NGramModel([0.3, 0.7])
    np.testing.assert_array_equal(free((1, 0, 1)), [0.3, 0.7])


def test_tabular_model_rejects_prefixes_beyond_its_depth() -> None:
    tree = TabularModel([np.array([[0.5, 0.5]]), np.array([[1.0, 0.0], [0.0, 1.0]])])
    np.testing.assert_array_equal(tree((1,)), [0.0, 1.0])
    with pytest.raises(ValueError, match="prefix"):
        tree((0, 0))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"kind": "bigram"}, "kind"),
        ({"distance": 1.5}, "distance"),
        ({"concentration": 0.0}, "concentration"),
        ({"sparsity": 1.0}, "sparsity"),
        ({"vocab": 0}, "vocab"),
    ],
)
def test_model_pair_names_bad_arguments(kwargs: dict, name: str) -> None:
    args = {"kind": "markov", "vocab": 3} | kwargs
    with pytest.raises(ValueError, match=name):
        model_pair(args.pop("kind"), args.pop("vocab"), **args)


def test_tabulating_a_plain_callable_matches_the_model_batch() -> None:
    target, _ = model_pair("ngram", 3, seed=1, context=2)
    direct = tabulate(target, 3, context=(2,))
    via_callable = tabulate(lambda prefix: target(prefix), 3, context=(2,))
    for a, b in zip(direct.conditionals, via_callable.conditionals, strict=True):
        np.testing.assert_allclose(a, b, atol=EXACT)
    np.testing.assert_allclose(direct.joint(3).sum(), 1.0)


def test_tabulate_names_the_model_with_a_bad_law() -> None:
    with pytest.raises(ValueError, match=r"target: .*prefix \(1,\)"):
        tabulate(lambda prefix: [1.0, 0.0] if prefix != (1,) else [0.5, 0.6], 2, name="target")


# ----- exact laws -------------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(model_pairs(), st.integers(1, 3))
def test_every_lossless_method_is_target_matching(pair: tuple, paths: int) -> None:
    """[GBV] Definition 3.1: output + target continuation has the target's law."""
    target, draft, gamma = pair
    expected = target_distribution(target, gamma + 1)
    runs = [("gbv", paths), ("spectr", paths)] + [("token", 1), ("block", 1)] * (paths == 1)
    for method, k in runs:
        out = output_distribution(target, draft, gamma, method, k)
        assert np.abs(out - expected).sum() < 1e-11, (method, k)
        law = output_law(target, draft, gamma, method, k)
        assert abs(law.accepted_law().sum() - 1.0) < 1e-12


@settings(max_examples=25, deadline=None)
@given(model_pairs(max_gamma=4))
def test_block_verification_dominates_tokenwise(pair: tuple) -> None:
    target, draft, gamma = pair
    token = expected_accepted(target, draft, gamma, "token")
    assert expected_accepted(target, draft, gamma, "block") >= token - 1e-12


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_special_cases_reduce_to_each_other(kind: str) -> None:
    target, draft = model_pair(kind, 3, seed=7, sparsity=0.3, depth=4)
    block = expected_accepted(target, draft, 3, "block")
    token = expected_accepted(target, draft, 3, "token")
    # GBV with one path is block verification; traversal with one path and the optimal
    # single-draft coupling is token-wise speculative sampling.
    assert abs(expected_accepted(target, draft, 3, "gbv", 1) - block) < EXACT
    assert abs(expected_accepted(target, draft, 3, "spectr", 1) - token) < 1e-9
    # A draft equal to the target accepts every token: L + 1 tokens per call. Not so GBV with
    # K > 1: its selection skews the draft away from the target.
    for method, k in [("token", 1), ("block", 1), ("gbv", 1), ("spectr", 2)]:
        assert abs(output_law(target, target, 3, method, k).block_efficiency - 4.0) < 1e-9
    assert output_law(target, target, 3, "gbv", 3).block_efficiency < 4.0 - 1e-3


def test_a_lossy_verifier_is_caught_by_target_matching() -> None:
    """The check can fail: a verifier that always keeps the first draft is not lossless."""
    target, draft = model_pair("markov", 3, seed=2, depth=3)

    def keep_first(p: np.ndarray, q: np.ndarray, n: int, drafted: np.ndarray) -> np.ndarray:
        return np.eye(p.shape[0])[drafted[0]]

    def ignore_drafts(p: np.ndarray, q: np.ndarray, n: int, drafted: np.ndarray) -> np.ndarray:
        return p

    expected = target_distribution(target, 3)
    lossy = output_distribution(target, draft, 2, "spectr", 2, rule=keep_first)
    assert np.abs(lossy - expected).sum() > 1e-2
    plain = output_distribution(target, draft, 2, "spectr", 2, rule=ignore_drafts)
    assert np.abs(plain - expected).sum() < EXACT


@pytest.mark.parametrize("rule", ["ot", "kseq", "rrs", "sps", "gumbel", "canonical"])
def test_traversal_with_every_iid_rule_is_target_matching(rule: str) -> None:
    """Order-dependent rules (RRS, K-SEQ, single-draft) see the drafts in draw order."""
    target, draft = model_pair("markov", 3, seed=1, sparsity=0.2)
    out = output_distribution(target, draft, 3, "spectr", 3, rule=rule)
    assert np.abs(out - target_distribution(target, 4)).sum() < 1e-11
    if rule == "sps":  # verifies the first active path, and a correction may land on another
        token = expected_accepted(target, draft, 3, "token")
        assert expected_accepted(target, draft, 3, "spectr", 3, rule=rule) > token + 1e-3
    if rule == "ot":  # the rules' OT is the max-flow plan's slice
        plan = expected_accepted(target, draft, 3, "spectr", 3, rule=PlanVerifier("maxflow"))
        assert abs(expected_accepted(target, draft, 3, "spectr", 3, rule=rule) - plan) < 1e-12


def test_traversal_refuses_rules_with_non_iid_draft_joints() -> None:
    target, draft = model_pair("markov", 3, seed=1)
    with pytest.raises(ValueError, match="rule: 'spechub'"):
        expected_accepted(target, draft, 2, "spectr", 2, rule="spechub")


def test_context_shifts_the_models() -> None:
    target, draft = model_pair("markov", 3, seed=4)
    a = expected_accepted(target, draft, 2, "block", context=(0,))
    b = expected_accepted(target, draft, 2, "block", context=(1,))
    assert abs(a - b) > 1e-3  # a margin, not float inequality
    same_last_token = expected_accepted(target, draft, 2, "block", context=(2, 1, 0))
    assert a == pytest.approx(same_last_token, abs=1e-12)


@pytest.mark.parametrize(
    ("args", "kwargs", "name"),
    [
        ((2, "beam"), {}, "method"),
        ((2, "block", 2), {}, "paths"),
        ((0, "block"), {}, "gamma"),
        ((2, "gbv", 2), {"ranking": "random"}, "ranking"),
        ((2, "spectr", 2), {"rule": "no-such-rule"}, "rule"),
    ],
)
def test_bad_arguments_are_value_errors_naming_them(args: tuple, kwargs: dict, name: str) -> None:
    target, draft = model_pair("markov", 2, seed=0)
    with pytest.raises(ValueError, match=name):
        expected_accepted(target, draft, *args, **kwargs)


def test_vocabulary_mismatch_is_rejected() -> None:
    target, _ = model_pair("markov", 3)
    _, draft = model_pair("markov", 2)
    with pytest.raises(ValueError, match="draft"):
        expected_accepted(target, draft, 2, "block")


# ----- GBV: tree ranking and skewed draft vs brute force ---------------------------------
def _all_paths(vocab: int, gamma: int) -> np.ndarray:
    return prefix_digits(np.arange(vocab**gamma), vocab, gamma)


@pytest.mark.parametrize("ranking", RANKINGS)
@pytest.mark.parametrize(("vocab", "gamma", "paths"), [(2, 3, 3), (3, 2, 2), (3, 2, 3)])
def test_skewed_draft_closed_form_matches_brute_force(
    ranking: str, vocab: int, gamma: int, paths: int
) -> None:
    """Eqs. 28–29 (on-path closed form) = Eq. 25 (global ranking) = the selection frequency
    of the highest-ranked path among all K-tuples of drafted paths (Definition 5.1)."""
    target, draft = model_pair("tree", vocab, seed=11, sparsity=0.3, depth=gamma + 1)
    tgt, dft = tabulate(target, gamma + 1), tabulate(draft, gamma)
    tokens = _all_paths(vocab, gamma)
    tc, dc = tgt.along_paths(tokens, gamma + 1), dft.along_paths(tokens, gamma)
    _, closed = skewed_conditionals(tc, dc, tokens, paths, ranking)
    order = tree_order(path_rank_keys(tc, dc, tokens, ranking))
    mass = dft.joint(gamma)
    np.testing.assert_allclose(closed, skewed_law(mass, order, paths), atol=EXACT)
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0])
    selected = np.zeros_like(mass)
    for tup in itertools.product(range(mass.shape[0]), repeat=paths):
        selected[max(tup, key=lambda i: rank[i])] += np.prod(mass[list(tup)])
    np.testing.assert_allclose(closed, selected, atol=EXACT)
    # The table GBV verifies against holds the same law.
    table = skewed_table(tgt, dft, gamma, paths, ranking)
    np.testing.assert_allclose(table.joint(gamma), closed, atol=EXACT)


def test_ratio_ranking_orders_children_by_increasing_target_draft_ratio() -> None:
    """Eq. 27: q~/M_s grows along the ranking, and so does M_b/M_s with "ratio"."""
    target, draft = model_pair("context-free", 4, seed=3)
    tgt, dft = tabulate(target, 2), tabulate(draft, 1)
    tokens = _all_paths(4, 1)
    keys = path_rank_keys(tgt.along_paths(tokens, 2), dft.along_paths(tokens, 1), tokens)
    ratio = tgt.conditionals[0][0] / dft.conditionals[0][0]
    np.testing.assert_array_equal(tree_order(keys), np.argsort(ratio))
    skewed = skewed_table(tgt, dft, 1, 3).joint(1)
    assert np.all(np.diff((skewed / dft.conditionals[0][0])[np.argsort(ratio)]) > 0)


def test_gbv_law_matches_running_the_algorithm_on_every_tuple_of_paths() -> None:
    """Brute force of Algorithm 1: draft K paths, select the top-ranked one from on-path
    values, block-verify it against its on-path skewed draft; aggregate over all tuples."""
    vocab, gamma, paths = 2, 2, 3
    target, draft = model_pair("tree", vocab, seed=5, sparsity=0.2, depth=gamma + 1)
    tgt, dft = tabulate(target, gamma + 1), tabulate(draft, gamma)
    tokens = _all_paths(vocab, gamma)
    mass = dft.joint(gamma)
    weight = np.zeros(tokens.shape[0])
    stop = np.zeros((tokens.shape[0], gamma + 1))
    correction = np.zeros((tokens.shape[0], gamma + 1, vocab))
    for tup in itertools.product(range(tokens.shape[0]), repeat=paths):
        drafted = tokens[list(tup)]
        tc, dc = tgt.along_paths(drafted, gamma + 1), dft.along_paths(drafted, gamma)
        top = tree_order(path_rank_keys(tc, dc, drafted))[-1:]
        skew, _ = skewed_conditionals(tc[top], dc[top], drafted[top], paths)
        law = single_path.block(tc[top], skew, drafted[top])
        chosen = tup[int(top[0])]
        prob = np.prod(mass[list(tup)])
        weight[chosen] += prob
        stop[chosen] = law.stop[0]
        correction[chosen] = law.correction[0]
    brute = single_path_law(single_path.StopLaw(stop, correction), weight, vocab)
    exact = output_law(target, draft, gamma, "gbv", paths)
    for a, b in zip(brute.emissions, exact.emissions, strict=True):
        np.testing.assert_allclose(a, b, atol=EXACT)


# ----- Monte Carlo decoding -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("method", "paths"), [("token", 1), ("block", 1), ("gbv", 3), ("spectr", 2)]
)
def test_simulation_agrees_with_exact_enumeration(method: str, paths: int) -> None:
    target, draft = model_pair("markov", 3, seed=8, sparsity=0.2)
    exact = expected_accepted(target, draft, 3, method, paths)
    run = simulate(target, draft, 3, method, paths, calls=1500, seed=1, restart=True)
    assert abs(run.expected_accepted - exact) < 4.5 * run.stderr
    assert run.calls == 1500 and run.block_efficiency == run.expected_accepted + 1


def test_decoding_simulation_accumulates_context() -> None:
    target, draft = model_pair("ngram", 4, seed=3, context=2)
    run = simulate(target, draft, 4, "gbv", 2, calls=200, seed=0)
    assert 1.0 <= run.block_efficiency <= 5.0
    again = simulate(target, draft, 4, "gbv", 2, calls=200, seed=0)
    np.testing.assert_array_equal(run.accepted, again.accepted)


# ----- command line -------------------------------------------------------------------------
def test_cli_prints_markdown_json_and_plots(tmp_path, capsys) -> None:
    base = ["multistep", "--vocab", "2", "--block-lengths", "1,2", "--paths", "1,2"]
    assert main([*base, "--markdown", "--plot", str(tmp_path / "be.png")]) == 0
    text = capsys.readouterr().out
    assert "| lp-optimum |" not in text and "**lp-optimum**" in text and "L=2" in text
    assert (tmp_path / "be.png").stat().st_size > 0
    assert main([*base, "--json", "--simulate", "50"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    sources = {r["source"] for r in rows}
    assert sources == {"exact", "lp", "simulation"}
    lp = {
        (r["paths"], r["block_length"]): r["block_efficiency"] for r in rows if r["source"] == "lp"
    }
    for r in rows:
        if r["source"] == "exact":
            assert r["block_efficiency"] <= lp[(r["paths"], r["block_length"])] + 1e-9


def test_cli_rejects_bad_lengths(capsys) -> None:
    assert main(["multistep", "--lengths", "0,x"]) == 2
    assert "--lengths" in capsys.readouterr().err


@pytest.mark.parametrize("spelling", ["Inverse_Ratio", " inverse_ratio ", "INVERSE-RATIO"])
def test_cli_ranking_takes_the_spellings_check_ranking_reads(spelling: str, capsys) -> None:
    """Issue 39 leftover: ``--ranking`` reads a name as ``check_ranking`` does (case,
    surrounding spaces, ``-`` or ``_``) and gives the canonical ranking's rows; an unknown
    name is still exit 2 naming the flag."""
    base = ["multistep", "--vocab", "2", "--lengths", "2", "--paths", "2", "--methods", "gbv"]
    base += ["--no-lp", "--json"]
    assert main([*base, "--ranking", "inverse-ratio"]) == 0
    canonical = json.loads(capsys.readouterr().out)["rows"]
    assert main([*base, "--ranking", spelling]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == canonical
    assert main([*base, "--ranking", "inverse ratio"]) == 2
    assert "--ranking" in capsys.readouterr().err


def test_cli_monte_carlo_only_for_models_too_large_to_enumerate(capsys) -> None:
    args = ["multistep", "--vocab", "30", "--lengths", "3", "--paths", "1,2", "--no-exact"]
    assert main([*args, "--no-lp", "--simulate", "20", "--decode", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {r["source"] for r in rows} == {"simulation"}
    assert {r["method"] for r in rows} == {"token", "block", "gbv", "traversal", "hsd", "spectr:ot"}


def test_simulation_arguments_are_checked() -> None:
    target, draft = model_pair("markov", 2)
    with pytest.raises(ValueError, match="calls"):
        simulate(target, draft, 2, "block", calls=0)
    with pytest.raises(ValueError, match="paths"):
        simulate(target, draft, 2, "token", 2)
