"""verify_drafts for the schemes beyond i.i.d. (:mod:`otlp.verification.position_schemes`):
the caller's atol, refusals naming the row (and the drafter), and the method in the result
(issue 39's mutation round)."""

from __future__ import annotations

import numpy as np
import pytest

import otlp

P = np.array([0.4, 0.3, 0.2, 0.1])
Q = np.array([0.1, 0.2, 0.3, 0.4])


@pytest.mark.parametrize("method", ["maxflow_cs", "rrs_without_replacement", "global_resolution"])
def test_the_callers_atol_reaches_the_scheme_rows(method):
    p = P * (1 + 1e-4)  # sums to 1 + 1e-4: beyond float64's default tolerance (1e-6)
    drafts = np.array([[0, 1], [2, 3]])
    kwargs = {"scheme": "without_replacement", "method": method, "rng": 0}
    with pytest.raises(ValueError, match=r"^p.*does not sum to 1"):
        otlp.verify_drafts(p, Q, drafts, **kwargs)
    result = otlp.verify_drafts(p, Q, drafts, atol=1e-3, **kwargs)
    assert result.tokens.shape == (2,)


@pytest.mark.parametrize("scheme", ["without_replacement", "greedy"])
def test_repeated_drafts_are_refused_naming_their_row(scheme):
    drafts = np.array([[0, 1], [1, 2], [3, 3]])
    with pytest.raises(ValueError, match=r"^drafts\[2\]: \[3, 3\] repeats a token"):
        otlp.verify_drafts(P, Q, drafts, scheme=scheme, method="maxflow_cs", rng=0)


def test_a_bad_draft_law_is_named_by_row_and_by_drafter():
    drafts = np.array([[0, 1], [2, 3]])
    q = np.tile(Q, (2, 1))
    q[1, 2] = np.nan
    with pytest.raises(ValueError, match=r"^q\[1\]: has a negative, NaN or infinite entry"):
        otlp.verify_drafts(P, q, drafts, scheme="without_replacement", method="maxflow_cs")
    two = np.tile(np.stack([Q, P]), (2, 1, 1))
    two[1, 1, 0] = -0.1
    with pytest.raises(ValueError, match=r"^q\[1, 1\]: has a negative, NaN or infinite entry"):
        otlp.verify_drafts(P, two, drafts, scheme="independent", method="maxflow_cs")


@pytest.mark.parametrize(
    ("scheme", "method"),
    [
        ("without_replacement", "maxflow_cs"),
        ("without_replacement", "rrs_without_replacement"),
        ("independent", "maxflow_cs"),
        ("greedy", "maxflow_cs"),
        ("iid", "spechub"),
    ],
)
def test_exact_scheme_rows_name_their_method(scheme, method):
    q = np.stack([Q, P]) if scheme == "independent" else Q
    drafts = np.array([[3, 2]] * 3)
    result = otlp.verify_drafts(P, q, drafts, scheme=scheme, method=method, rng=0)
    assert result.method == method
    assert all(r.message == "exact" for r in result.reports)


@pytest.mark.parametrize("scheme", ["without_replacement", "independent"])
def test_rows_of_a_scheme_unit_over_the_limits_are_its_lossless_rules(scheme):
    """Global resolution's unit over otlp.limits: every row is the scheme's lossless rule's
    (rrs without replacement; rrs for two independent drafters), and every report names it;
    without replacement, the same tokens from the same seed as that rule called directly."""
    rng = np.random.default_rng(22)
    p = rng.dirichlet(np.ones(60))
    if scheme == "independent":
        q = rng.dirichlet(np.ones(60), size=2)
    else:
        q = rng.dirichlet(np.ones(60))
    drafts = np.tile(np.argsort(q.reshape(-1, 60)[0])[::-1][:2], (6, 1))
    with otlp.limits.limited(max_variables=100):
        refused = otlp.verify_drafts(p, q, drafts, scheme=scheme, rng=3)
    rule = "rrs" if scheme == "independent" else "rrs_without_replacement"
    assert refused.method == "global_resolution"
    assert all(r.fallback and r.fallback_rule == rule for r in refused.reports)
    if scheme == "without_replacement":
        alone = otlp.verify_drafts(p, q, drafts, scheme=scheme, method=rule, rng=3)
        np.testing.assert_array_equal(refused.tokens, alone.tokens)


def test_a_spechub_pair_without_the_hub_is_refused_naming_it():
    """SpecHub's pairs always hold the hub a = argmax q (token 3 here): row 1's pair (0, 1)
    is one its hub joint cannot draw, refused naming the row, the pair and the hub."""
    with pytest.raises(
        ValueError,
        match=r"^drafts\[1\]: \[0, 1\] does not contain SpecHub's hub token 3 \(argmax q\)",
    ):
        otlp.verify_drafts(P, Q, np.array([[3, 0], [0, 1]]), method="spechub", rng=0)


def test_a_method_that_is_not_a_name_is_refused_by_name():
    with pytest.raises(ValueError, match=r"^method: expected a string, got 3$"):
        otlp.verify_drafts(P, Q, np.array([[0, 1]]), scheme="without_replacement", method=3)


def test_a_method_the_scheme_does_not_take_is_refused_listing_those_it_takes():
    with pytest.raises(
        ValueError,
        match=r"^method: scheme 'without_replacement' takes global_resolution, "
        r"rrs_without_replacement, maxflow_cs, got 'sps'$",
    ):
        otlp.verify_drafts(P, Q, np.array([[0, 1]]), scheme="without_replacement", method="sps")


def test_top_k_above_the_vocabulary_and_spechub_triples_are_refused_by_name():
    with pytest.raises(ValueError, match=r"^top_k: "):
        otlp.verify_drafts(P, Q, np.array([[0, 1]]), scheme="without_replacement", top_k=5)
    with pytest.raises(ValueError, match=r"^drafts: 'spechub' verifies a pair per row, got n = 3$"):
        otlp.verify_drafts(P, Q, np.array([[3, 0, 1]]), method="spechub")


@pytest.mark.parametrize("scheme", ["without_replacement", "greedy"])
def test_a_token_repeated_past_the_first_draft_is_refused(scheme):
    """Three drafts, the second and third equal: a repeat anywhere in the row is found."""
    with pytest.raises(
        ValueError,
        match=rf"^drafts\[1\]: \[1, 3, 3\] repeats a token; scheme '{scheme}' drafts distinct "
        r"tokens$",
    ):
        otlp.verify_drafts(
            P, Q, np.array([[3, 2, 0], [1, 3, 3]]), scheme=scheme, method="maxflow_cs"
        )


def test_parallel_is_refused_by_name_for_the_schemes_beyond_iid():
    drafts = np.array([[0, 1]])
    kwargs = {"scheme": "without_replacement", "method": "maxflow_cs"}
    with pytest.raises(ValueError, match=r"^parallel: expected True or False, got 1$"):
        otlp.verify_drafts(P, Q, drafts, parallel=1, **kwargs)
    with pytest.raises(
        ValueError,
        match=r"^parallel: only the i.i.d. fused path runs on numba's threads; scheme "
        r"'without_replacement' verifies its rows one by one$",
    ):
        otlp.verify_drafts(P, Q, drafts, parallel=True, **kwargs)


def test_one_draft_per_row_gives_the_same_tokens_under_every_scheme_and_method():
    """A single draft is one draw from q whatever the scheme: its exact law is speculative
    sampling's, and every path draws each row's token from the row's own two uniforms of
    ``rng.random((B, 2))``, so the same seed gives the same 50 tokens as the i.i.d. rows."""
    rng = np.random.default_rng(1)
    p, q = rng.dirichlet(np.ones(8)), rng.dirichlet(np.ones(8))
    drafts = rng.choice(8, size=(50, 1), p=q)
    iid = otlp.verify_drafts(p, q, drafts, method="maxflow_cs", rng=4).tokens
    for scheme, method in [
        ("without_replacement", "maxflow_cs"),
        ("without_replacement", "rrs_without_replacement"),
        ("without_replacement", "global_resolution"),
        ("greedy", "maxflow_cs"),
        ("greedy", "global_resolution"),
    ]:
        tokens = otlp.verify_drafts(p, q, drafts, scheme=scheme, method=method, rng=4).tokens
        np.testing.assert_array_equal(tokens, iid, err_msg=f"{scheme} {method}")


def test_a_scheme_that_is_not_a_name_is_refused_by_name():
    with pytest.raises(ValueError, match=r"^scheme: expected a string, got 3$"):
        otlp.verify_drafts(P, Q, np.array([[0, 1]]), scheme=3, method="maxflow_cs")
