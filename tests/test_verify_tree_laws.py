"""verify_tree at one node, method by method: exact laws by enumeration, samplers by chi^2.

tests/test_verification_tree.py checks whole trees against the target's law. Here each node
method of :func:`otlp.decoding.verify_tree` is taken at a single node with hand-picked
(p, q) where its rule does all of its work (rejections, residuals after rejections, the
final residual draw): (1) its exact conditional law, summed over the children's drafting
law, is p ([GR] Theorem R.1; global resolution within 15 tau), and (2) its sampler, run on
thousands of rows with the same drafts, follows that exact law (chi^2, and no outcome of
exact probability 0). (2) catches a sampler changed while the law formula is kept, e.g. a
residual computed against the original q instead of the draft's remaining law, or a final
residual draw that reuses a candidate's uniform. Only the public API is used.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from otlp.decoding import (
    chain,
    children_probability,
    k_ary_tree,
    node_law,
    outcome_law,
    path_tree,
)
from otlp.multistep.models import model_pair
from tests.repeated_rows import repeated_row_counts

# (p, q, drafts) at the root of path_tree(n, 1): n children, each a one-token path.
# - "wor3": without replacement, the first draft rejected for sure (p = 0 there) and the
#   second rejected often, so the final residual is reached with probability ~0.8 and must
#   be taken against the remaining draft law (q with the drafted tokens removed).
# - "pair": the residual after rejecting both drafts puts mass on token 0, which is not
#   drafted; the final draw's uniform must be fresh (a reused uniform is >= the last
#   candidate's acceptance, so token 0, at the bottom of the CDF, would never be drawn).
NODES = {
    "wor3": (
        np.array([0.32, 0.66, 0.0, 0.02]),
        np.array([0.01, 0.15, 0.05, 0.79]),
        (3, 2, 1),
    ),
    "pair": (
        np.array([0.262, 0.044, 0.022, 0.672]),
        np.array([0.047, 0.063, 0.654, 0.236]),
        (2, 1),
    ),
    "spechub_pair": (
        np.array([0.30, 0.05, 0.05, 0.60]),
        np.array([0.05, 0.10, 0.70, 0.15]),
        (2, 1),
    ),
}

# (method, scheme, node): every node method on the instances where its rule is exercised.
CASES = [
    ("sps", "iid", "pair"),
    ("sps", "without_replacement", "wor3"),
    ("sps", "spechub", "spechub_pair"),
    ("rrs", "iid", "pair"),
    ("rrs", "iid", "wor3"),
    ("kseq", "iid", "pair"),
    ("kseq", "iid", "wor3"),
    ("rrs_without_replacement", "without_replacement", "wor3"),
    ("rrs_without_replacement", "without_replacement", "pair"),
    ("spechub", "spechub", "spechub_pair"),
    ("spechub", "spechub", "pair"),
    ("global_resolution", "iid", "pair"),
    ("global_resolution", "without_replacement", "wor3"),
    ("maxflow_cs", "iid", "pair"),
    ("maxflow_cs", "without_replacement", "wor3"),
    ("partial_resolution", "iid", "pair"),
    ("partial_resolution", "iid", "wor3"),
]
ROWS = 4000
TAU = 1e-4
# methods that solve a plan per row (no compiled row kernel): fewer rows
SOLVED_PER_ROW = {("maxflow_cs", "iid"), ("maxflow_cs", "without_replacement")}
SOLVED_PER_ROW.add(("global_resolution", "without_replacement"))


def tau_of(method):
    """TAU for global resolution, none for the exact methods (they refuse a tau)."""
    return {"tau": TAU} if method == "global_resolution" else {}


def node_laws(p, q, n):
    """p, q at the root and at each child's context (the latter are never read)."""
    vocab = p.shape[0]
    rest = np.full((n, vocab), 1.0 / vocab)
    return np.vstack([p, rest]), np.vstack([q, rest])


def exact_output_law(method, scheme, p, q, n):
    """The method's output law at one node: its conditional law given each drafted tuple,
    summed over the tuples with their drafting probability."""
    parents = path_tree(n, 1)
    pp, qq = node_laws(p, q, n)
    total = np.zeros(p.shape[0])
    for omega in itertools.product(range(p.shape[0]), repeat=n):
        mass = children_probability(q, np.array(omega), scheme)
        if mass == 0.0:
            continue
        law = outcome_law(
            np.array(omega), parents, pp, qq, method=method, scheme=scheme, **tau_of(method)
        )
        for emitted, prob in law.items():
            total[emitted[0]] += mass * prob
    return total


@pytest.mark.parametrize(("method", "scheme", "node"), CASES)
def test_each_node_method_is_lossless_by_enumeration(method, scheme, node):
    p, q, drafts = NODES[node]
    got = exact_output_law(method, scheme, p, q, len(drafts))
    bound = 15 * TAU if method == "global_resolution" else 1e-12
    assert np.abs(got - p).sum() <= bound


def sampled_and_exact(method, scheme, node, rows=ROWS, top_k=None):
    p, q, drafts = NODES[node]
    n = len(drafts)
    parents = path_tree(n, 1)
    pp, qq = node_laws(p, q, n)
    law = outcome_law(
        np.array(drafts),
        parents,
        pp,
        qq,
        method=method,
        scheme=scheme,
        **tau_of(method),
        top_k=top_k,
    )
    counts = repeated_row_counts(
        np.array(drafts),
        parents,
        pp,
        qq,
        rows,
        method=method,
        scheme=scheme,
        **tau_of(method),
        top_k=top_k,
        rng=np.random.default_rng(17),
    )
    return counts, law


def assert_follows(counts, law, rows):
    """No outcome of exact probability 0, and chi^2 against the exact law (p > 1e-4)."""
    impossible = {k: c for k, c in counts.items() if law.get(k, 0.0) <= 0.0}
    assert not impossible, f"outcomes of exact probability 0 were emitted: {impossible}"
    keys = sorted(law)
    expected = np.array([law[k] for k in keys]) * rows
    observed = np.array([counts.get(k, 0) for k in keys], dtype=float)
    big = expected >= 5
    expected = np.append(expected[big], expected[~big].sum())
    observed = np.append(observed[big], observed[~big].sum())
    if expected[-1] == 0.0:
        expected, observed = expected[:-1], observed[:-1]
    assert stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue > 1e-4


@pytest.mark.parametrize(
    ("method", "scheme", "node"),
    [case for case in CASES if case[0] not in ("global_resolution", "maxflow_cs")],
)
def test_each_node_sampler_under_top_k_follows_its_exact_law(method, scheme, node):
    """With top-k the node rules run row by row as procedures (lazy rejection sampling,
    K-SEQ's and SpecHub's tokens from their parameters), not the compiled walk; top_k = V
    keeps q as it is, so the exact law is the same."""
    counts, law = sampled_and_exact(method, scheme, node, top_k=4)
    assert_follows(counts, law, ROWS)


@pytest.mark.parametrize(("method", "scheme", "node"), CASES)
def test_each_node_sampler_follows_its_exact_law(method, scheme, node):
    rows = 800 if (method, scheme) in SOLVED_PER_ROW else ROWS
    counts, law = sampled_and_exact(method, scheme, node, rows)
    assert_follows(counts, law, rows)


def test_without_replacement_residual_uses_the_remaining_draft_law():
    """The reproducer of issue 27: with drafts (3, 2, 1) without replacement the row emits
    either the correction token 0 or the accepted draft 3 (then a bonus token): after two
    rejections the residual, taken against the remaining draft law, is 0 everywhere but at
    token 0. A residual against the original q emits token 1 (exact probability 0) as a
    correction in about 12% of rows."""
    counts, law = sampled_and_exact("rrs_without_replacement", "without_replacement", "wor3")
    assert all(key == (0,) or key[0] == 3 for key in law)
    assert law[(0,)] > 0.9
    assert set(counts) <= set(law)


@pytest.mark.parametrize(
    ("method", "scheme", "node"), [("kseq", "iid", "pair"), ("spechub", "spechub", "spechub_pair")]
)
def test_final_residual_draw_reaches_the_bottom_of_the_cdf(method, scheme, node):
    """Token 0 (not drafted) is emitted only by the final residual draw, with exact
    probability 0.23 (K-SEQ) or 0.45 (SpecHub); a sampler whose last uniform is reused (it
    then lies above the last candidate's acceptance) never emits it (K-SEQ) or emits it in
    37% of rows (SpecHub). Its count must lie within 5 binomial standard deviations."""
    counts, law = sampled_and_exact(method, scheme, node)
    share = law[(0,)]
    assert share > 0.2
    spread = 5 * np.sqrt(ROWS * share * (1 - share))
    assert abs(counts.get((0,), 0) - share * ROWS) <= spread


# ----- whole trees: the samplers the tree-level sampler tests of test_verification_tree lack ---
TREE_CASES = [
    ("sps", "without_replacement", k_ary_tree((2, 2))),
    ("sps", "spechub", k_ary_tree((2, 2))),
    ("rrs_without_replacement", "without_replacement", path_tree(2, 2)),
    ("maxflow_cs", "iid", path_tree(2, 2)),
    ("maxflow_cs", "without_replacement", k_ary_tree((2, 2))),
    ("partial_resolution", "iid", path_tree(2, 2)),
    ("partial_resolution", "iid", path_tree(3, 1)),
    ("hsd", "iid", chain(3)),
]


def tree_instance(parents, scheme, seed=4, vocab=3):
    """Drafted tokens (distinct siblings, so every scheme allows them; the hub argmax q among
    each SpecHub pair) and the toy models' laws at every context of the tree."""
    target, draft = model_pair("tree", vocab, seed=seed, distance=0.7, depth=4)
    tokens = np.zeros(parents.shape[0], dtype=np.int64)
    prefixes = [()]
    for i, parent in enumerate(parents):
        siblings = [j for j in range(i) if parents[j] == parent]
        order = np.argsort(-draft(prefixes[parent + 1]), kind="stable")
        tokens[i] = order[len(siblings)]
        prefixes.append((*prefixes[parent + 1], int(tokens[i])))
    p = np.array([target(prefix) for prefix in prefixes])
    q = np.array([draft(prefix) for prefix in prefixes])
    return tokens, p, q


@pytest.mark.parametrize(("method", "scheme", "parents"), TREE_CASES)
def test_tree_sampler_follows_its_exact_law(method, scheme, parents):
    tokens, p, q = tree_instance(parents, scheme)
    law = outcome_law(tokens, parents, p, q, method=method, scheme=scheme, **tau_of(method))
    assert sum(law.values()) == pytest.approx(1.0, abs=1e-9)
    rows = 800 if (method, scheme) in SOLVED_PER_ROW else ROWS
    counts = repeated_row_counts(
        tokens,
        parents,
        p,
        q,
        rows,
        method=method,
        scheme=scheme,
        **tau_of(method),
        rng=np.random.default_rng(23),
    )
    assert_follows(counts, law, rows)


# ----- equal children: i.i.d. drafts merge them, other schemes follow the first ------------
MERGE_TREE = np.array([-1, -1, 0, 1])  # two root children, one child each


def merge_instance(q_root):
    """Tokens (1, 1, 0, 2): the root's two children carry token 1; the laws at nodes 0 and
    1 (the same prefix) are equal, and there draft 0 is rejected w.p. 5/6 while draft 2 is
    always accepted, so verifying (0, 2) or (0) alone gives different laws."""
    tokens = np.array([1, 1, 0, 2])
    p = np.array(
        [
            [0.2, 0.3, 0.5],
            [0.1, 0.3, 0.6],
            [0.1, 0.3, 0.6],
            [0.6, 0.3, 0.1],
            [0.1, 0.1, 0.8],
        ]
    )
    q = np.array([q_root, [0.6, 0.3, 0.1], [0.6, 0.3, 0.1], [1 / 3] * 3, [1 / 3] * 3])
    return tokens, p, q


def expected_merge_law(method, scheme, tokens, p, q, second_level):
    """The walk's law by hand from node_law: the root verifies (1, 1); on token 1 the next
    node verifies ``second_level`` (children of both nodes, or of the first only) at node
    0's context; an accepted child's bonus comes from its own context."""
    out: dict[tuple[int, ...], float] = {}
    root = node_law(p[0], q[0], tokens[:2], method=method, scheme=scheme)
    for y in np.flatnonzero(root > 0):
        if y != 1:
            out[(int(y),)] = root[y]
            continue
        omega = tokens[list(second_level)]
        step = node_law(p[1], q[1], omega, method=method, scheme=scheme)
        for z in np.flatnonzero(step > 0):
            nodes = [i for i in second_level if tokens[i] == z]
            if not nodes:
                out[(1, int(z))] = root[1] * step[z]
                continue
            for w in np.flatnonzero(p[nodes[0] + 1] > 0):
                out[(1, int(z), int(w))] = root[1] * step[z] * p[nodes[0] + 1][w]
    return out


@pytest.mark.parametrize(
    ("method", "scheme", "q_root", "second_level"),
    [
        ("rrs", "iid", [0.3, 0.4, 0.3], (2, 3)),  # i.i.d.: one context, both children
        ("sps", "iid", [0.3, 0.4, 0.3], (2, 3)),
        ("spechub", "spechub", [0.0, 1.0, 0.0], (2,)),  # a one-hot draft's pair (1, 1)
    ],
)
def test_equal_children_are_merged_only_for_iid_drafts(method, scheme, q_root, second_level):
    """[GR] Appendix R: i.i.d. children of equal tokens share their context, so the walk
    verifies the union of their children; under other schemes it moves to the first child.
    The exact law against the hand-built walk, and the sampler against the exact law."""
    tokens, p, q = merge_instance(np.array(q_root))
    law = outcome_law(tokens, MERGE_TREE, p, q, method=method, scheme=scheme)
    expected = expected_merge_law(method, scheme, tokens, p, q, second_level)
    assert set(law) == set(expected)
    for key, value in expected.items():
        assert law[key] == pytest.approx(value, abs=1e-12)
    counts = repeated_row_counts(
        tokens, MERGE_TREE, p, q, ROWS, method=method, scheme=scheme, rng=np.random.default_rng(5)
    )
    assert_follows(counts, law, ROWS)


@pytest.mark.parametrize("method", ["global_resolution", "maxflow_cs"])
def test_node_law_defaults_to_iid_drafts_and_tau_1e_3(method):
    p, q, drafts = NODES["pair"]
    omega = np.array(drafts)
    default = node_law(p, q, omega, method=method)
    explicit = node_law(p, q, omega, method=method, scheme="iid", tau=1e-3)
    np.testing.assert_array_equal(default, explicit)
