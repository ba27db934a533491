"""Multi-path prompt lookup: its candidates, its draft law, and losslessness by exact
enumeration on toy models (every applicable rule, the law the decode loop draws from), with a
negative control: the same drafts verified under the single-path (one-hot) law are biased."""

from __future__ import annotations

import numpy as np
import pytest

from otlp import decoding
from otlp.decoding.models.lookup import MULTI_PATH_FLOOR, PromptLookup, candidates, lookup_spec
from otlp.multistep.models import model_pair
from tests.test_verification_tree import SHAPES, V, emitted_law, target_law

# A context in which the suffix (0,) recurs with continuations 2, 1 (most recent first) and
# the suffix (1, 0) with 1: several matches, several draft paths.
PROMPT = (0, 1, 0, 1, 2, 0, 2, 1, 0)


def lookup_draft(width: int, floor: float | None = None, ngram: int = 2):
    law = PromptLookup(V, ngram=ngram, width=width, floor=floor)
    return lambda prefix: law.batch(np.array([PROMPT + tuple(prefix)]))[0]


def test_candidates_longest_suffix_first_then_most_recent():
    assert candidates([1, 2, 3, 9, 1, 2], 3, 3) == [3]
    assert candidates([4, 1, 2, 7, 1, 2, 5, 2], 3, 4) == [5, 7]
    # suffix (1, 0) -> 1; then (0,) -> 2, 1 (already found), ...
    assert candidates(PROMPT, 2, 3) == [1, 2]
    assert candidates([5, 6, 7], 2, 2) == []


def test_multi_path_law_shares_the_mass_and_keeps_a_floor():
    law = PromptLookup(10, width=2).batch(np.array([[1, 2, 3, 1, 2, 4, 1, 2]]))[0]
    assert law.sum() == pytest.approx(1.0)
    assert law[4] == law[3] == pytest.approx((1 - MULTI_PATH_FLOOR) / 2 + MULTI_PATH_FLOOR / 10)
    assert law[0] == pytest.approx(MULTI_PATH_FLOOR / 10)
    one = PromptLookup(10).batch(np.array([[1, 2, 3, 1, 2, 4, 1, 2]]))[0]
    assert one[4] == 1.0 and one.sum() == 1.0  # width 1: the single-path one-hot law


def test_lookup_draft_names():
    assert lookup_spec("lookup") == (3, 1)
    assert lookup_spec("lookup2") == (2, 1)
    assert lookup_spec("lookup3w4") == (3, 4)
    assert lookup_spec("lookupw2") == (3, 2)
    assert lookup_spec("skip4") is None
    with pytest.raises(ValueError, match="draft"):
        lookup_spec("lookup0w2")


@pytest.mark.parametrize(
    ("method", "scheme", "shape", "floor"),
    [
        ("rrs_without_replacement", "without_replacement", "paths2x2", None),
        ("rrs_without_replacement", "without_replacement", "tree2x2", 0.2),
        ("rrs", "iid", "paths2x2", None),
        ("kseq", "iid", "paths2x2", 0.2),
        ("gbv", "iid", "paths2x2", None),
        ("spechub", "spechub", "paths2x2", 0.2),
        ("sps", "iid", "chain3", None),
        ("block", "iid", "chain3", 0.2),
    ],
)
def test_multi_path_lookup_is_lossless(method, scheme, shape, floor):
    parents = SHAPES[shape]
    target, _ = model_pair("tree", V, seed=4, distance=0.6, depth=4)
    depth = int(decoding.depth(parents).max())
    got = emitted_law(target, lookup_draft(2, floor), parents, method, scheme)
    assert np.abs(got - target_law(target, depth + 1)).max() < 1e-12


@pytest.mark.parametrize(
    ("method", "scheme"), [("rrs_without_replacement", "without_replacement"), ("rrs", "iid")]
)
def test_verifying_multi_path_drafts_with_the_single_path_law_is_biased(method, scheme):
    # The rule must be handed the law the children were drawn from: the single-path law
    # (all mass but the floor on the most recent match) does not describe several paths.
    # (With no floor the verifier refuses outright: a drafted token has probability 0.)
    parents = SHAPES["paths2x2"]
    target, _ = model_pair("tree", V, seed=4, distance=0.6, depth=4)
    exact = target_law(target, 3)
    drafted, single = lookup_draft(2, 0.2), lookup_draft(1, 0.2)
    got = emitted_law(target, drafted, parents, method, scheme, verify_draft=single)
    assert np.abs(got - exact).max() > 1e-3
    with pytest.raises(ValueError, match="draft probability is 0"):
        emitted_law(target, drafted, parents, method, scheme, verify_draft=lookup_draft(1, 0.0))
