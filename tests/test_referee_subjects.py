"""The subjects from the field (otlp.referee.subjects) do what their docstrings say.

Lossless subjects: at one position, the joint law of (drafts, output) matches the exact law of
the equivalent otlp rule (``otlp.rules``: rrs, rrs_without_replacement, sps; the target for
target-only) by a chi-square test, and that exact law's output marginal is p, checked by
enumerating every drafted tuple; on trees, the emitted tokens completed to depth D + 1 with
target draws follow the target's product law (chi-square). Lossy subjects: on a stated
instance, the sampled law sits at the total-variation distance derived by hand in the test,
and the suspect that over-accepts does so beyond alpha*. Acceptance of the lossless subjects
stays at most alpha* of their scheme.

Every chi-square test runs at significance SIGNIFICANCE (cells expected below 5 draws pooled)
on fixed seeds, so the suite is deterministic; a draw where the exact law has no mass fails
outright.
"""

from __future__ import annotations

import doctest
import inspect
import itertools
from collections.abc import Callable

import numpy as np
import pytest

import otlp
import otlp.referee.subjects
import otlp.rules
from otlp.decoding import children_probability, outcome_law
from otlp.referee.subjects import PROTOCOLS, SUBJECTS, Subject
from otlp.referee.subjects.suspects import top_list, top_n_id_sorted_residual
from tests.chi_square import chi_square_pvalue

SIGNIFICANCE = 1e-4
DRAWS = 12_000  # per position test
TREE_DRAWS = 6_000  # per tree test: V ** (DEPTH + 1) = 27 cells


def _draw(law: np.ndarray, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
    """Inverse-CDF draws from ``law`` (cheaper than Generator.choice per call)."""
    return np.searchsorted(np.cumsum(law), rng.random(size), side="right")


# ----- the registry ------------------------------------------------------------------------
@pytest.mark.parametrize("name", SUBJECTS)
def test_each_subject_states_its_protocol_scheme_verdict_and_source(name: str) -> None:
    subject = SUBJECTS[name]
    assert subject.name == name
    assert subject.protocol in PROTOCOLS and subject.scheme in otlp.SCHEMES
    assert subject.source
    doc = " ".join((inspect.getdoc(subject.sampler) or "").split())
    assert f"Protocol: {subject.protocol}" in doc
    assert "Expected lossless" in doc or "Expected lossy" in doc
    assert subject.expected_lossless or "lossy" in doc
    params = list(inspect.signature(subject.sampler).parameters)
    expected = ["p", "q", "drafts", "rng"] if subject.protocol == "position" else None
    assert params[:4] == (expected or ["tokens", "parents", "p", "q", "rng"])[:4]


def test_each_sampler_declares_its_protocol_and_scheme_for_the_referee() -> None:
    """A bare sampler (``otlp referee MODULE:FUNCTION``) carries its protocol and scheme: one
    function per registration."""
    assert len({id(s.sampler) for s in SUBJECTS.values()}) == len(SUBJECTS)
    for name, subject in SUBJECTS.items():
        declared = (subject.sampler.protocol, subject.sampler.scheme)
        assert declared == (subject.protocol, subject.scheme), name


def test_the_package_example_runs() -> None:
    result = doctest.testmod(otlp.referee.subjects)
    assert result.attempted > 0 and result.failed == 0


def test_the_registry_holds_the_field_s_algorithms() -> None:
    lossless = {s.name for s in SUBJECTS.values() if s.expected_lossless}
    lossy = {s.name for s in SUBJECTS.values() if not s.expected_lossless}
    assert {
        "target_only_tree",
        "specinfer",
        "specinfer_tree",
        "sequoia",
        "sequoia_tree",
        "single_draft",
        "single_chain_tree",
        "block_verification_tree",
        "sglang_target_only_tree",
        "eagle_target_only_tree",
    } <= lossless
    assert {
        "sibling_ratio_no_residual",
        "sibling_ratio_no_residual_tree",
        "top_n_id_sorted_residual",
        "top_n_id_sorted_residual_tree",
        "typical_acceptance_chain_tree",
        "sglang_target_only_relaxed",
        "sglang_target_only_relaxed_tree",
        "trtllm_dynamic_tree",
        "vllm_synthetic",
        "vllm_synthetic_chain_tree",
        "medusa_typical_tree",
        "eagle3_hsd_tree",
    } <= lossy


# ----- one position: exact laws by enumeration, samples by chi-square ----------------------
P3 = np.array([0.45, 0.35, 0.2])
Q3 = np.array([0.2, 0.3, 0.5])
Q3_OTHER = np.array([0.5, 0.1, 0.4])
P4 = np.array([0.1, 0.4, 0.3, 0.2])
Q4 = np.array([0.4, 0.1, 0.2, 0.3])


def _tuple_mass(q: np.ndarray, omega: tuple[int, ...], scheme: str) -> float:
    if scheme == "independent":
        return float(np.prod([q[j, x] for j, x in enumerate(omega)]))
    return children_probability(q, omega, scheme)


def _conditional(rule: str | None, inst: otlp.Instance, omega: tuple[int, ...]) -> np.ndarray:
    """The exact output law given the drafts of the otlp rule a subject models (None: p)."""
    if rule is None:
        return inst.p
    return otlp.rules.get(rule).conditional(inst, list(omega))


# (subject, the equivalent otlp rule, p, q, n, scheme)
POSITION_CASES = [
    ("specinfer", "rrs", P3, Q3, 2, "iid"),
    ("specinfer", "rrs", P3, np.stack([Q3, Q3_OTHER]), 2, "independent"),
    ("specinfer", "rrs", P4, Q4, 2, "iid"),
    ("sequoia", "rrs_without_replacement", P3, Q3, 2, "without_replacement"),
    ("sequoia", "rrs_without_replacement", P4, Q4, 3, "without_replacement"),
    ("single_draft", "sps", P4, Q4, 1, "iid"),
    ("single_draft", "sps", P3, Q3, 2, "iid"),  # verifies the first draft, as otlp's sps
    ("target_only", None, P3, Q3, 2, "iid"),
    ("eagle_target_only", None, P3, Q3, 2, "iid"),
    ("sglang_target_only", None, P4, Q4, 3, "without_replacement"),
    # suspect B is right where both candidate lists hold the same ids (full support, V <= 8)
    ("top_n_id_sorted_residual", "rrs", P4, Q4, 2, "iid"),
]


def _position_joint(
    rule: str | None, p: np.ndarray, q: np.ndarray, n: int, scheme: str
) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """Every drafted tuple (draw order) of positive mass and the exact joint law of
    (tuple, output) as an array (tuples, V)."""
    inst = otlp.Instance(p, list(q) if scheme == "independent" else q, n, scheme)
    tuples, rows = [], []
    for omega in itertools.product(range(p.shape[0]), repeat=n):
        mass = _tuple_mass(q, omega, scheme)
        if mass > 0:
            tuples.append(omega)
            rows.append(mass * _conditional(rule, inst, omega))
    return tuples, np.array(rows)


@pytest.mark.parametrize(("name", "rule", "p", "q", "n", "scheme"), POSITION_CASES)
def test_position_subject_follows_the_exact_law_and_outputs_p(
    name: str, rule: str | None, p: np.ndarray, q: np.ndarray, n: int, scheme: str
) -> None:
    tuples, joint = _position_joint(rule, p, q, n, scheme)
    assert joint.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(joint.sum(axis=0), p, atol=1e-12)  # the rule is lossless
    rng = np.random.default_rng(7)
    counts = np.zeros_like(joint)
    picks = rng.choice(len(tuples), size=DRAWS, p=joint.sum(axis=1))
    sampler = SUBJECTS[name].sampler
    for t in picks:
        counts[t, sampler(p, q, np.array(tuples[t]), rng)] += 1
    assert chi_square_pvalue(counts, DRAWS * joint) > SIGNIFICANCE


def _empirical(sampler: Callable, p: np.ndarray, q: np.ndarray, n: int, seed: int = 3):
    """DRAWS outputs of a position sampler on i.i.d. drafts: (output law, acceptance rate)."""
    rng = np.random.default_rng(seed)
    counts = np.zeros(p.shape[0])
    accepted = 0
    for _ in range(DRAWS):
        drafts = _draw(q, rng, n)
        y = sampler(p, q, drafts, rng)
        counts[y] += 1
        accepted += int(y in drafts)
    return counts / DRAWS, accepted / DRAWS


def _spread(rate: float) -> float:
    return 4.0 * np.sqrt(max(rate * (1 - rate), 1e-4) / DRAWS)


@pytest.mark.parametrize(("name", "rule", "p", "q", "n", "scheme"), POSITION_CASES)
def test_position_acceptance_is_at_most_alpha_star(
    name: str, rule: str | None, p: np.ndarray, q: np.ndarray, n: int, scheme: str
) -> None:
    """P(output in drafts) sampled, against alpha* of the scheme; the subject's acceptance is
    also the exact acceptance of the rule it models."""
    inst = otlp.Instance(p, list(q) if scheme == "independent" else q, n, scheme)
    alpha_star = otlp.optimal_acceptance(inst).alpha_star
    tuples, joint = _position_joint(rule, p, q, n, scheme)
    exact = sum(joint[t, list(set(omega))].sum() for t, omega in enumerate(tuples))
    assert exact <= alpha_star + 1e-12
    rng = np.random.default_rng(5)
    picks = rng.choice(len(tuples), size=DRAWS, p=joint.sum(axis=1))
    sampler = SUBJECTS[name].sampler
    hits = sum(int(sampler(p, q, np.array(tuples[t]), rng) in tuples[t]) for t in picks)
    assert abs(hits / DRAWS - exact) <= _spread(exact)


def test_suspect_a_over_accepts_and_misses_p_by_tv_0_2() -> None:
    """p = (0.5, 0.5), q = (0.9, 0.1), n = 2: each draft of 0 is accepted with 5/9, so a try
    returns 0 w.p. 0.9 * 5/9 = 0.5, 1 w.p. 0.1 and falls through w.p. 0.4 (to the next try,
    which ignores the first rejection); P(y = 0) = 0.5 + 0.4 * 0.5 = 0.7, TV 0.2; acceptance
    0.6 + 0.4 * 0.6 = 0.84 > alpha* = 0.69 (no lossless rule exceeds alpha*)."""
    p, q = np.array([0.5, 0.5]), np.array([0.9, 0.1])
    law, acceptance = _empirical(SUBJECTS["sibling_ratio_no_residual"].sampler, p, q, 2)
    assert abs(law[0] - 0.7) <= _spread(0.7)
    assert 0.5 * np.abs(law - p).sum() >= 0.2 - _spread(0.7)
    alpha_star = otlp.optimal_acceptance(otlp.Instance(p, q, 2)).alpha_star
    assert alpha_star == pytest.approx(0.69)
    assert abs(acceptance - 0.84) <= _spread(0.84)
    assert acceptance > alpha_star + _spread(0.84)


def test_suspect_a_is_right_with_one_draft() -> None:
    p, q = np.array([0.5, 0.5]), np.array([0.9, 0.1])
    law, _ = _empirical(SUBJECTS["sibling_ratio_no_residual"].sampler, p, q, 1)
    assert chi_square_pvalue(law * DRAWS, p * DRAWS) > SIGNIFICANCE


def test_sglang_target_only_counts_a_repeated_sibling_twice() -> None:
    """p = (0.5, 0.5), drafts (0, 0): the running sum reaches 1 at the second sibling, so the
    coin always accepts token 0 (law (1, 0), TV 0.5); with distinct drafts it is y ~ p."""
    rng = np.random.default_rng(0)
    sampler = SUBJECTS["sglang_target_only"].sampler
    p = np.array([0.5, 0.5])
    assert {sampler(p, p, np.array([0, 0]), rng) for _ in range(200)} == {0}


def test_candidate_lists_keep_the_most_likely_positive_tokens_ties_to_lower_ids() -> None:
    law = np.array([0.2, 0.3, 0.0, 0.3, 0.2])
    ids, probs = top_list(law, 3)
    assert ids.tolist() == [0, 1, 3] and probs.tolist() == [0.2, 0.3, 0.3]
    assert top_list(law, 10)[0].tolist() == [0, 1, 3, 4]  # no zero-probability candidate
    assert top_list(law, 1)[0].tolist() == [1]


def test_typical_acceptance_follows_q_above_its_threshold_and_argmax_below() -> None:
    """p = (0.5, 0.5), q = (0.9, 0.1): both drafts pass min(0.09, 0.3 exp(-H(p))) = 0.09, so
    y ~ q (TV 0.4); p = (0.6, 0.35, 0.05), q = (0, 0, 1): the draft 2 fails it and y = argmax
    p = 0 always (TV 0.4)."""
    sampler = SUBJECTS["typical_acceptance"].sampler
    p, q = np.array([0.5, 0.5]), np.array([0.9, 0.1])
    law, _ = _empirical(sampler, p, q, 1)
    np.testing.assert_allclose(law, q, atol=_spread(0.1))
    rng = np.random.default_rng(0)
    p, q = np.array([0.6, 0.35, 0.05]), np.array([0.0, 0.0, 1.0])
    assert {sampler(p, q, np.array([2]), rng) for _ in range(100)} == {0}


def test_suspect_b_misaligned_lists_miss_p_by_tv_0_5() -> None:
    """p = (0.5, 0.3, 0.2), q = (0, 0.5, 0.5), n = 1: the draft list [1, 2] is subtracted from
    the target's first entries [0, 1]: residual (0, 0, 0.2) instead of (0.5, 0, 0). Accepts 1
    w.p. 0.5 * 0.6, 2 w.p. 0.5 * 0.4, else emits 2: law (0, 0.3, 0.7), TV 0.5."""
    p, q = np.array([0.5, 0.3, 0.2]), np.array([0.0, 0.5, 0.5])
    law, _ = _empirical(SUBJECTS["top_n_id_sorted_residual"].sampler, p, q, 1)
    np.testing.assert_allclose(law, [0.0, 0.3, 0.7], atol=_spread(0.5))
    assert 0.5 * np.abs(law - p).sum() >= 0.5 - _spread(0.5)


def test_suspect_b_top_n_shorter_than_the_support_misses_p_by_tv_0_1() -> None:
    """Full supports, top_n = 2: p = (0.6, 0.3, 0.1) lists [0, 1], q = (0.1, 0.3, 0.6) lists
    [1, 2]. Draft 0 (0.1) is outside q's list (q read as 0): accepted; 1 (0.3) accepted; 2
    (0.6) is outside p's list: rejected, residual (0.6 - 0.3, 0.3 - 0.6)+ on ids [0, 1]: token
    0. Law (0.7, 0.3, 0), TV 0.1."""
    p, q = np.array([0.6, 0.3, 0.1]), np.array([0.1, 0.3, 0.6])

    def top_two(p: np.ndarray, q: np.ndarray, drafts: np.ndarray, rng: np.random.Generator):
        return top_n_id_sorted_residual(p, q, drafts, rng, top_n=2)

    law, _ = _empirical(top_two, p, q, 1)
    np.testing.assert_allclose(law, [0.7, 0.3, 0.0], atol=_spread(0.5))


# ----- trees: the emitted stream against the target's product law ---------------------------
V, DEPTH = 3, 2


def _language_model(seed: int) -> dict[tuple[int, ...], np.ndarray]:
    """A law over V tokens for every prefix of length <= DEPTH (Dirichlet, seeded)."""
    rng = np.random.default_rng(seed)
    prefixes = [()] + [
        pre for d in range(1, DEPTH + 1) for pre in itertools.product(range(V), repeat=d)
    ]
    return {pre: rng.dirichlet(np.full(V, 2.0)) for pre in prefixes}


TARGET, DRAFT = _language_model(1), _language_model(2)
# the draft without token 0: the candidate lists of suspect B then hold different ids
SPARSE_DRAFT = {pre: np.append(0.0, law[1:] / law[1:].sum()) for pre, law in DRAFT.items()}
CHAIN = np.array([-1, 0])
BINARY = np.array([-1, -1, 0, 0, 1, 1])  # two children at the root, two under each


def _draft_children(law: np.ndarray, k: int, scheme: str, rng: np.random.Generator) -> np.ndarray:
    """k children drafted from ``law``: i.i.d., or without replacement (Gumbel-top-k, whose
    order is the order of sequential draws without replacement)."""
    if scheme == "iid":
        return _draw(law, rng, k)
    with np.errstate(divide="ignore"):
        keys = np.log(law) + rng.gumbel(size=law.shape[0])
    return np.argsort(-keys)[:k]


def _draft_tree(
    parents: np.ndarray,
    scheme: str,
    rng: np.random.Generator,
    draft: dict[tuple[int, ...], np.ndarray] = DRAFT,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tokens drafted node by node (children of a node jointly, under ``scheme``) and the
    target and draft laws at the contexts, (N + 1, V) each."""
    tokens = np.full(parents.shape[0], -1, dtype=np.int64)
    prefix: dict[int, tuple[int, ...]] = {-1: ()}
    for node in [-1, *range(parents.shape[0])]:
        kids = np.flatnonzero(parents == node)
        if kids.shape[0]:
            law = draft[prefix[node]]
            tokens[kids] = _draft_children(law, kids.shape[0], scheme, rng)
            for k in kids:
                prefix[int(k)] = (*prefix[node], int(tokens[k]))
    contexts = [prefix[i] for i in range(-1, parents.shape[0])]
    return tokens, np.array([TARGET[c] for c in contexts]), np.array([draft[c] for c in contexts])


def _check_path(nodes: list[int], parents: np.ndarray) -> None:
    for depth, node in enumerate(nodes):
        assert parents[node] == (nodes[depth - 1] if depth else -1), "not a root-to-node path"


def _emitted_counts(
    subject: Subject,
    parents: np.ndarray,
    seed: int,
    draft: dict[tuple[int, ...], np.ndarray] = DRAFT,
) -> np.ndarray:
    """Counts over V ** (DEPTH + 1) sequences: the emitted tokens (accepted path + bonus)
    completed to DEPTH + 1 tokens with draws from the target."""
    rng = np.random.default_rng(seed)
    counts = np.zeros((V,) * (DEPTH + 1))
    for _ in range(TREE_DRAWS):
        tokens, p, q = _draft_tree(parents, subject.scheme, rng, draft)
        nodes, bonus = subject.sampler(tokens, parents, p, q, rng)
        _check_path(list(nodes), parents)
        out = [int(t) for t in tokens[list(nodes)]] + [int(bonus)]
        while len(out) < DEPTH + 1:
            out.append(int(_draw(TARGET[tuple(out)], rng)))
        counts[tuple(out)] += 1
    return counts


def _product_law() -> np.ndarray:
    law = np.zeros((V,) * (DEPTH + 1))
    for seq in itertools.product(range(V), repeat=DEPTH + 1):
        law[seq] = np.prod([TARGET[seq[:i]][seq[i]] for i in range(DEPTH + 1)])
    return law


TREE_CASES = [
    ("target_only_tree", BINARY),
    ("specinfer_tree", BINARY),
    ("sequoia_tree", BINARY),
    ("sglang_target_only_tree", BINARY),
    ("eagle_target_only_tree", BINARY),
    ("single_chain_tree", CHAIN),
    ("block_verification_tree", CHAIN),
    # chain verifiers on a wider tree read the chain of first children
    ("single_chain_tree", BINARY),
    ("block_verification_tree", BINARY),
]


@pytest.mark.parametrize(("name", "parents"), TREE_CASES)
def test_tree_subject_emits_the_target_s_stream(name: str, parents: np.ndarray) -> None:
    counts = _emitted_counts(SUBJECTS[name], parents, seed=11)
    assert chi_square_pvalue(counts, TREE_DRAWS * _product_law()) > SIGNIFICANCE


@pytest.mark.parametrize(
    ("name", "parents"),
    [
        ("sibling_ratio_no_residual_tree", BINARY),
        ("top_n_id_sorted_residual_tree", BINARY),
        ("sglang_target_only_tree_iid", BINARY),
        ("typical_acceptance_chain_tree", CHAIN),
    ],
)
def test_lossy_tree_subject_is_caught(name: str, parents: np.ndarray) -> None:
    """The same test flags the lossy subjects (two i.i.d. children per node where they take
    trees) when the draft puts no mass on token 0; the emitted stream's TV from the target's
    is measured beside it."""
    counts = _emitted_counts(SUBJECTS[name], parents, seed=11, draft=SPARSE_DRAFT)
    law = _product_law()
    assert chi_square_pvalue(counts, TREE_DRAWS * law) < SIGNIFICANCE
    # measured: 0.26 (suspect A), 0.45 (suspect B), 0.29 (SGLang's coin on repeated siblings),
    # 0.46 (typical acceptance)
    assert 0.5 * np.abs(counts / TREE_DRAWS - law).sum() > 0.15


def test_block_verification_keeps_its_exact_efficiency_above_the_token_wise_chain() -> None:
    """The mean accepted length on drafted chains of 2 matches the exact block efficiency of
    otlp's block verification (``outcome_law``, every chain enumerated), which exceeds the
    token-wise rule's (block verification is optimal among valid chain verifiers, Sun et al.
    2025: optimal in the expected number of tokens per iteration)."""
    exact = {}
    for method in ("block", "sps"):
        total = 0.0
        for chain in itertools.product(range(V), repeat=2):
            mass = DRAFT[()][chain[0]] * DRAFT[chain[:1]][chain[0 + 1]]
            p = np.array([TARGET[()], TARGET[chain[:1]], TARGET[chain]])
            q = np.array([DRAFT[()], DRAFT[chain[:1]], DRAFT[chain]])
            law = outcome_law(np.array(chain), CHAIN, p, q, method=method)
            total += mass * sum(share * (len(out) - 1) for out, share in law.items())
        exact[method] = total
    assert exact["block"] > exact["sps"] + 0.02
    rng = np.random.default_rng(13)
    lengths = []
    for _ in range(TREE_DRAWS):
        tokens, p, q = _draft_tree(CHAIN, "iid", rng)
        nodes, _ = SUBJECTS["block_verification_tree"].sampler(tokens, CHAIN, p, q, rng)
        lengths.append(len(nodes))
    assert abs(np.mean(lengths) - exact["block"]) <= 4 * np.std(lengths) / np.sqrt(TREE_DRAWS)


# ----- bad input ---------------------------------------------------------------------------
def test_position_arguments_are_checked_by_name() -> None:
    rng = np.random.default_rng(0)
    specinfer = SUBJECTS["specinfer"].sampler
    with pytest.raises(ValueError, match=r"^q:"):
        specinfer(P3, Q4, np.array([0]), rng)
    with pytest.raises(ValueError, match=r"^drafts:"):
        specinfer(P3, Q3, np.array([3]), rng)
    with pytest.raises(ValueError, match=r"^drafts:"):
        specinfer(P3, np.array([0.0, 0.5, 0.5]), np.array([0]), rng)
    with pytest.raises(ValueError, match=r"^drafts:"):
        SUBJECTS["sequoia"].sampler(P3, Q3, np.array([1, 1]), rng)
    with pytest.raises(ValueError, match=r"^q:"):
        SUBJECTS["sequoia"].sampler(P3, np.stack([Q3, Q3]), np.array([0, 1]), rng)
    with pytest.raises(ValueError, match=r"^drafts:"):
        SUBJECTS["single_draft"].sampler(P3, Q3, np.array([], dtype=np.int64), rng)


def test_tree_arguments_are_checked_by_name() -> None:
    rng = np.random.default_rng(0)
    laws = np.full((3, 3), 1 / 3)
    with pytest.raises(ValueError, match=r"^parents:"):
        SUBJECTS["specinfer_tree"].sampler(np.array([0, 1]), np.array([-1, 1]), laws, laws, rng)
    with pytest.raises(ValueError, match=r"^p:"):
        SUBJECTS["specinfer_tree"].sampler(np.array([0, 1]), CHAIN, laws[:2], laws, rng)
    with pytest.raises(ValueError, match=r"^tokens:"):
        SUBJECTS["specinfer_tree"].sampler(np.array([0, 3]), CHAIN, laws, laws, rng)
    for name in ("specinfer_tree", "block_verification_tree"):
        with pytest.raises(ValueError, match=r"^tokens:"):  # a present node, absent parent
            SUBJECTS[name].sampler(np.array([-1, 1]), CHAIN, laws, laws, rng)


def test_absent_nodes_end_the_walk() -> None:
    """-1 marks an absent node (verify_tree's layout): a chain cut there ends at its last
    present node and the bonus comes from that node's context."""
    rng = np.random.default_rng(0)
    p = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    for name in ("specinfer_tree", "single_chain_tree", "block_verification_tree"):
        nodes, bonus = SUBJECTS[name].sampler(np.array([1, -1]), CHAIN, p, p, rng)
        assert (list(nodes), bonus) == ([0], 2)


# ----- exact laws through the referee's exact mode (after the merge with its branch) --------
# (subject, p, q, n, scheme, the exact TV from p: 0 for the lossless ones, the stated value
# for the suspects)
EXACT_POSITION_CASES = [
    ("specinfer", P4, Q4, 3, "iid", 0.0),
    ("specinfer", P3, np.stack([Q3, Q3_OTHER]), 2, "independent", 0.0),
    ("sequoia", P4, Q4, 3, "without_replacement", 0.0),
    ("single_draft", P4, Q4, 1, "iid", 0.0),
    ("target_only", P4, Q4, 3, "iid", 0.0),
    ("eagle_target_only", P4, Q4, 3, "iid", 0.0),
    ("sglang_target_only", P4, Q4, 3, "without_replacement", 0.0),
    ("top_n_id_sorted_residual", P4, Q4, 3, "iid", 0.0),
    ("sibling_ratio_no_residual", np.array([0.5, 0.5]), np.array([0.9, 0.1]), 2, "iid", 0.2),
    ("top_n_id_sorted_residual", np.array([0.5, 0.3, 0.2]), np.array([0, 0.5, 0.5]), 1, "iid", 0.5),
    ("typical_acceptance", np.array([0.5, 0.5]), np.array([0.9, 0.1]), 1, "iid", 0.4),
    # accepted with 0.7 whatever p, else norm(max(p - q, 0)) = (1, 0): law (0.44, 0.56)
    ("vllm_synthetic", np.array([0.5, 0.5]), np.array([0.2, 0.8]), 1, "iid", 0.06),
    ("vllm_synthetic", np.array([0.4, 0.6]), np.array([0.43, 0.57]), 1, "iid", 0.099),
    ("vllm_synthetic", np.array([0.4, 0.6]), np.array([0.4, 0.6]), 1, "iid", 0.0),  # p = q
]


@pytest.mark.parametrize(("name", "p", "q", "n", "scheme", "tv"), EXACT_POSITION_CASES)
def test_exact_output_law_by_the_referee_s_branching_generator(
    name: str, p: np.ndarray, q: np.ndarray, n: int, scheme: str, tv: float
) -> None:
    """Every drafted tuple enumerated with its probability, every uniform of the subject
    branched by the referee's exact mode: the output law is p to rounding (lossless) or sits
    at exactly the TV derived by hand in the lossy tests above."""
    symbolic = pytest.importorskip("otlp.referee.symbolic")
    sampler = SUBJECTS[name].sampler
    law = np.zeros(p.shape[0])
    for omega in itertools.product(range(p.shape[0]), repeat=n):
        mass = _tuple_mass(q, omega, scheme)
        if mass > 0:
            drafts = np.array(omega)
            given = symbolic.exact_law(lambda rng, d=drafts: sampler(p, q, d, rng))
            for token, share in given.items():
                law[token] += mass * share
    assert 0.5 * np.abs(law - p).sum() == pytest.approx(tv, abs=1e-12)


@pytest.mark.parametrize(
    "name",
    [
        "single_chain_tree",
        "block_verification_tree",
        "specinfer_tree",
        "target_only_tree",
        "typical_acceptance_chain_tree",
    ],
)
def test_exact_emitted_stream_on_chains_by_the_referee_s_branching_generator(name: str) -> None:
    """Every drafted chain of two enumerated with its draft probability, the subject's exact
    law of (accepted nodes, bonus) by the referee's exact mode, the emitted tokens completed to
    DEPTH + 1 with the target's laws: the stream's law is the target's product law to rounding
    for the lossless subjects, and far from it for typical acceptance."""
    symbolic = pytest.importorskip("otlp.referee.symbolic")
    subject = SUBJECTS[name]
    law = np.zeros((V,) * (DEPTH + 1))
    for chain in itertools.product(range(V), repeat=2):
        mass = DRAFT[()][chain[0]] * DRAFT[chain[:1]][chain[1]]
        contexts = [(), chain[:1], chain]
        p = np.array([TARGET[c] for c in contexts])
        q = np.array([DRAFT[c] for c in contexts])
        tokens = np.array(chain)
        outcomes = symbolic.exact_law(
            lambda rng, t=tokens, p=p, q=q: subject.sampler(t, CHAIN, p, q, rng),
            key=lambda out: (tuple(int(i) for i in out[0]), int(out[1])),
        )
        for (nodes, bonus), share in outcomes.items():
            emitted = (*(chain[i] for i in nodes), bonus)
            for seq in itertools.product(range(V), repeat=DEPTH + 1 - len(emitted)):
                full = emitted + seq
                rest = np.prod([TARGET[full[:i]][full[i]] for i in range(len(emitted), DEPTH + 1)])
                law[full] += mass * share * rest
    tv = 0.5 * np.abs(law - _product_law()).sum()
    if subject.expected_lossless:
        assert tv < 1e-12
    else:
        assert tv > 0.1


def test_sglang_s_thresholds_below_one_deviate_by_the_hand_computed_amount() -> None:
    """Issue 35's subject: SGLang's target-only coin with threshold_acc 0.7 (threshold_single
    0.9) accepts the first sibling with min(1, p / 0.7): p = (0.5, 0.5), q = (0.9, 0.1), two
    drafts without replacement give P(y = 0) = 0.9 * 5/7 + 0.1 * 2/7 (exact law of the
    sampler, every draw branched); with thresholds 1 the same kernel is lossless here."""
    from otlp.referee import symbolic
    from otlp.referee.subjects.target_only import sglang_target_only

    p, q = np.array([0.5, 0.5]), np.array([0.9, 0.1])
    drafts = {(0, 1): 0.9, (1, 0): 0.1}  # without replacement from q

    def emits_zero(sampler: Callable[..., int]) -> float:
        total = 0.0
        for omega, mass in drafts.items():
            given = np.array(omega)
            law = symbolic.exact_law(lambda rng, d=given: sampler(p, q, d, rng))
            total += mass * law.get(0, 0.0)
        return total

    relaxed = SUBJECTS["sglang_target_only_relaxed"].sampler
    assert abs(emits_zero(relaxed) - (0.9 * 5 / 7 + 0.1 * 2 / 7)) < 1e-12
    assert abs(emits_zero(sglang_target_only) - 0.5) < 1e-12
    verdict = otlp.referee.referee(SUBJECTS["sglang_target_only_relaxed"].sampler, cases=20)
    assert not verdict.lossless and verdict.failure is not None and verdict.failure.tv > 0.1


# ----- issue 35's subjects: engines' rules judged by the referee's exact mode ----------------
def _tree_case(root_p, root_q, next_p, next_q, parents, scheme):
    """A depth-1 or depth-2 TreeCase from the root's laws and one law per token after it."""
    from otlp.referee.cases import TreeCase

    levels = 2 if max(parents) < 0 else 3
    vocab = len(root_p)
    target = [np.array([root_p]), np.array(next_p)]
    draft = [np.array([root_q]), np.array(next_q)]
    if levels == 3:
        target.append(np.tile(np.array(next_p), (vocab, 1)))
        draft.append(np.tile(np.array(next_q), (vocab, 1)))
    return TreeCase(tuple(target), tuple(draft), np.array(parents), scheme)


def _exact_deviation(name: str, case) -> float:
    """The referee's exact verdict on one case, unshrunk: deviating, exact, its TV."""
    subject = SUBJECTS[name]
    verdict = otlp.referee.referee(
        subject.sampler,
        protocol=subject.protocol,
        scheme=subject.scheme,
        cases=[case],
        mode="exact",
        shrink_failures=False,
    )
    assert verdict.status == "deviation" and verdict.statistical_cases == 0
    assert verdict.failure is not None
    return float(verdict.failure.tv)


TRT_P = np.array([0.0, 0.30, 0.15, 0.05, 0.50])  # TensorRT-LLM's fixture: root_target_probs
TRT_Q = np.array([0.0, 0.35, 0.35, 0.30, 0.0])  # draft_child_probs


def test_trtllm_dynamic_tree_kernel_gives_its_fixture_s_tv_0_557() -> None:
    """TensorRT-LLM's own unit test of its dynamic-tree rejection kernel: a root with children
    1, 2, 3, target p = TRT_P at every context, draft q = TRT_Q. Each sibling is tried against
    the same row p: token 1 is accepted with 0.30 / 0.35 = 6/7, token 2 with (1/7)(3/7), token
    3 with (1/7)(4/7)(1/6), else the residual (0, 0, 0, 0, 1): the first token follows
    (0, 6/7, 3/49, 2/147, 10/147), TV 6/7 - 0.3 = 39/70 = 0.557 from p (by hand). The
    referee's exact mode (every uniform branched) on the fixture's drafted tree gives it to
    rounding, for the emitted stream completed to depth 2. That number is a law given one
    drafted tree, not yet a verdict: Sequoia's lossless rule, which also tries token 1 first,
    emits (0, 6/7, 0, 0, 1/7) on this tree, at the same TV; over the drafting (the next test)
    Sequoia is exact and the kernel is not."""
    from otlp.referee import symbolic
    from otlp.referee.observe import emitted

    case = _tree_case(TRT_P, TRT_Q, [TRT_P] * 5, [TRT_Q] * 5, [-1, -1, -1], "without_replacement")
    tokens = np.array([1, 2, 3])
    p, q = case.context_laws(tokens)
    np.testing.assert_array_equal(p, np.tile(TRT_P, (4, 1)))  # the fixture's target_probs_tree

    def stream_tv(name: str) -> float:
        sampler = SUBJECTS[name].sampler
        outcomes = symbolic.exact_law(
            lambda rng: sampler(tokens, case.parents, p, q, rng), key=symbolic.tree_key
        )
        law = sum(
            share * case.completion(emitted(case, tokens, out)) for out, share in outcomes.items()
        )
        return 0.5 * float(np.abs(law - case.target).sum())

    first = np.zeros(5)
    sampler = SUBJECTS["trtllm_dynamic_tree"].sampler
    outcomes = symbolic.exact_law(
        lambda rng: sampler(tokens, case.parents, p, q, rng), key=symbolic.tree_key
    )
    for (nodes, bonus), share in outcomes.items():
        first[tokens[nodes[0]] if nodes else bonus] += share
    np.testing.assert_allclose(first, [0, 6 / 7, 3 / 49, 2 / 147, 10 / 147], atol=1e-15)
    assert stream_tv("trtllm_dynamic_tree") == pytest.approx(39 / 70, abs=1e-12)
    assert round(stream_tv("trtllm_dynamic_tree"), 3) == 0.557
    assert stream_tv("sequoia_tree") == pytest.approx(39 / 70, abs=1e-12)


def test_trtllm_dynamic_tree_drafted_as_the_kernel_drafts_deviates_by_127_294() -> None:
    """The same laws with the siblings drafted (3 of 3 tokens without replacement, so every
    order of 1, 2, 3 with its probability): the residual's mass (1/7)(4/7)(5/6) = 10/147 does
    not depend on the order, and tokens 1-3 take the rest, so TV = 0.5 - 10/147 = 127/294
    (0.432) — the referee's exact verdict on the case, where Sequoia's rule is exact."""
    case = _tree_case(TRT_P, TRT_Q, [TRT_P] * 5, [TRT_Q] * 5, [-1, -1, -1], "without_replacement")
    assert _exact_deviation("trtllm_dynamic_tree", case) == pytest.approx(127 / 294, abs=1e-12)
    verdict = otlp.referee.referee(SUBJECTS["sequoia_tree"].sampler, cases=[case], mode="exact")
    assert verdict.lossless and verdict.exact_cases == 1


def test_trtllm_dynamic_tree_is_lossless_on_one_child_and_on_two_of_two_tokens() -> None:
    """One child: speculative sampling. Two children covering V = 2 without replacement:
    order (0, 1) w.p. q0 accepts 0 with p0 / q0 (p0 < q0) and 1 surely, so P(0) = p0."""
    nxt = [[0.4, 0.6], [0.2, 0.8]]
    for parents in ([-1], [-1, -1]):
        case = _tree_case([0.6, 0.4], [0.9, 0.1], nxt, nxt, parents, "without_replacement")
        sampler = SUBJECTS["trtllm_dynamic_tree"].sampler
        verdict = otlp.referee.referee(sampler, cases=[case], mode="exact")
        assert verdict.lossless and verdict.exact_cases == 1, parents


def test_vllm_synthetic_chain_accepts_by_its_schedule_whatever_p() -> None:
    """vLLM's conversion c_i = a_i / a_(i-1) of the unconditional schedule (0.7, 0.5, 0.4),
    0 after a zero; on a one-node chain with p = (0.6, 0.4), q = (0.9, 0.1) at the root the
    first token is 0 w.p. 0.7 * 0.9 (the residual is (0, 1)): 0.63 against 0.6, TV 0.03;
    on a two-node chain the second draft is accepted with 5/7 after the first."""
    from otlp.referee.subjects.synthetic import RATES, conditional_rates

    assert RATES == (0.7, 0.5, 0.4)
    np.testing.assert_allclose(conditional_rates(), [0.7, 5 / 7, 0.8])
    assert conditional_rates((0.5, 0.0, 0.0)) == [0.5, 0.0, 0.0]
    nxt = [[0.4, 0.6], [0.2, 0.8]]
    case = _tree_case([0.6, 0.4], [0.9, 0.1], nxt, nxt, [-1], "iid")
    assert _exact_deviation("vllm_synthetic_chain_tree", case) == pytest.approx(0.03, abs=1e-12)
    # the accepted prefixes of a two-node chain: 0.3 none, 0.7 (2/7) one, 0.7 (5/7) both
    from otlp.referee import symbolic

    sampler = SUBJECTS["vllm_synthetic_chain_tree"].sampler
    half = np.full((3, 2), 0.5)
    law = symbolic.exact_law(
        lambda rng: sampler(np.array([0, 1]), CHAIN, half, half, rng), key=symbolic.tree_key
    )
    accepted = dict.fromkeys([(), (0,), (0, 1)], 0.0)
    for (nodes, _), share in law.items():
        accepted[nodes] += share
    np.testing.assert_allclose(
        [accepted[()], accepted[(0,)], accepted[(0, 1)]], [0.3, 0.2, 0.5], atol=1e-12
    )


def test_medusa_typical_tree_emits_argmax_after_its_best_path() -> None:
    """p = (0.6, 0.4) at the root, (0.4, 0.6) after 0 and (0.2, 0.8) after 1, q = (0.9, 0.1):
    the drafted token passes min(0.09, 0.3 exp(-H)) either way and the next token is argmax p
    after it, 1: the stream is (0, 1) w.p. 0.9 and (1, 1) w.p. 0.1 against the target's
    (0.24, 0.36, 0.08, 0.32): TV 0.9 - 0.36 = 0.54. With both tokens as siblings the likelier
    one, 0, wins: (0, 1) always, TV 0.64."""
    nxt = [[0.4, 0.6], [0.2, 0.8]]
    one = _tree_case([0.6, 0.4], [0.9, 0.1], nxt, nxt, [-1], "without_replacement")
    assert _exact_deviation("medusa_typical_tree", one) == pytest.approx(0.54, abs=1e-12)
    two = _tree_case([0.6, 0.4], [0.9, 0.1], nxt, nxt, [-1, -1], "without_replacement")
    assert _exact_deviation("medusa_typical_tree", two) == pytest.approx(0.64, abs=1e-12)


def test_medusa_typical_tree_prefers_the_longest_then_the_likeliest_path() -> None:
    """Children 0 (p 0.6) and 1 (p 0.4) at the root; only 1's child 2 passes (0 has child 2
    of mass 0 after 0): the deeper path (1, 2) wins over the likelier 0. A refused root: no
    node, argmax p at the root."""
    sampler = SUBJECTS["medusa_typical_tree"].sampler
    rng = np.random.default_rng(0)
    parents = np.array([-1, -1, 0, 1])
    tokens = np.array([0, 1, 2, 2])
    p = np.array(
        [[0.6, 0.4, 0.0], [0.5, 0.5, 0.0], [0.1, 0.1, 0.8], [0.1, 0.2, 0.7], [0.3, 0.3, 0.4]]
    )
    assert sampler(tokens, parents, p, p, rng) == ([1, 3], 2)
    p[2] = [0.1, 0.1, 0.8]  # both paths pass to depth 2: the likelier, 0.6 * 0.8 > 0.4 * 0.8
    p[1] = [0.1, 0.1, 0.8]
    assert sampler(tokens, parents, p, p, rng) == ([0, 2], 2)
    refused = np.array([[0.96, 0.02, 0.02]] * 5)  # threshold 0.09: tokens 1, 2 refused
    assert sampler(np.array([1, 2, 1, 2]), parents, refused, refused, rng) == ([], 0)


def test_trtllm_dynamic_tree_deviates_by_5_44_on_the_table_s_minimal_case() -> None:
    """docs/referee.md's minimal case: V = 3, a root with 2 children drawn without replacement,
    p = (4/11, 4/11, 3/11), q = (0.3, 0.6, 0.1). The orders (0, 1), (0, 2), (1, 0), (1, 2),
    (2, 0), (2, 1) come with 9/35, 3/70, 9/20, 3/20, 1/30, 1/15; tokens 0 and 2 are accepted
    surely and token 1 with (4/11) / 0.6 = 20/33, each sibling against the same p, so the
    residual is never reached: P(0) = 9/35 + 3/70 + 9/20 * 13/33 = 21/44 against 16/44,
    P(1) = 0.6 * 20/33 = 4/11, P(2) = 3/20 * 13/33 + 1/10 = 7/44 against 12/44: TV 5/44 (by
    hand; the token after the first is drawn from p, so the stream adds nothing)."""
    p, q, nxt = [4 / 11, 4 / 11, 3 / 11], [0.3, 0.6, 0.1], [np.full(3, 1 / 3)] * 3
    case = _tree_case(p, q, nxt, nxt, [-1, -1], "without_replacement")
    assert _exact_deviation("trtllm_dynamic_tree", case) == pytest.approx(5 / 44, abs=1e-12)


@pytest.mark.parametrize(
    ("name", "vocab", "tv"),
    [
        ("trtllm_dynamic_tree", 3, 0.114),  # V = 2 with both tokens drafted is lossless (above)
        ("vllm_synthetic", 2, 0.099),
        ("vllm_synthetic_chain_tree", 2, 0.03),
        ("medusa_typical_tree", 2, 0.54),
    ],
)
def test_issue_35_subjects_deviate_at_the_defaults_in_exact_mode(
    name: str, vocab: int, tv: float
) -> None:
    """The table's verdicts: every new lossy subject deviates at the referee's defaults, in
    exact mode, with a minimal case of the stated vocabulary and the table's TV to its three
    decimals (the tests above compute those TVs by hand)."""
    subject = SUBJECTS[name]
    verdict = otlp.referee.referee(
        subject.sampler,
        protocol=subject.protocol,
        scheme=subject.scheme,
        max_children=subject.max_children,
    )
    assert verdict.status == "deviation" and verdict.statistical_cases == 0
    assert verdict.failure is not None and verdict.failure.tv > 0.01
    assert round(verdict.failure.tv, 3) == tv
    assert verdict.failure.case.vocab == vocab


# ----- HSD on EAGLE-3's trees (issue 38): exact two deep, lossy three deep --------------------
FORK = np.array([-1, 0, 0, 2])  # node 0 = A; its children 1 = B (a leaf) and 2 = C; 3 = E under C


def _hsd_law(tokens: np.ndarray, parents: np.ndarray, p: np.ndarray) -> dict:
    """The exact law of (accepted nodes, emitted token) of EAGLE-3H's rule on one fixed tree
    (every uniform branched by the referee's exact mode; q is never read)."""
    from otlp.referee import symbolic

    sampler = SUBJECTS["eagle3_hsd_tree"].sampler
    return symbolic.exact_law(
        lambda rng: sampler(tokens, parents, p, p, rng), key=symbolic.tree_key
    )


def _first_two(law: dict, tokens: np.ndarray) -> dict[tuple[int, ...], float]:
    """The law of the emitted stream's first two tokens (one token where it stops at the root)."""
    out: dict[tuple[int, ...], float] = {}
    for (nodes, bonus), share in law.items():
        key = (*(int(tokens[n]) for n in nodes), int(bonus))[:2]
        out[key] = out.get(key, 0.0) + share
    return out


def test_eagle3_hsd_tree_under_accepts_a_sibling_path_after_an_accepted_token() -> None:
    """Tokens A = 0, B = 1, C = 2, E = 0; target (1/2, 1/4, 1/4) at the root, uniform after A,
    (1/2, 1/4, 1/4) after A C (by hand). Path (A, B): A is kept and B refused with
    P_1 - P_2 = 1/2 - 1/6 = 1/3; path (A, C, E) then starts at prefix mass w = 1/2 with the
    residual r = (1/2, 0, 1/2): a1 = r(C) = 1/2, a2 = 1/2, W = (1/2, 1/4, 1/8). The whole
    remainder passes with a1 a2 = 1/4; else level 1 stops with (W_1 - W_2) / (1 - W_2) = 1/7
    and level 0 takes the rest. So C follows A with 1/3 (1/4 + 3/4 * 1/7) = 5/42 instead of
    1/6, and the residual token 0 with 3/14 instead of 1/6: TV 1/21 on the first two tokens,
    while (A, B) keeps 1/6 and (A, C, E) 1/12, the target's."""
    tokens = np.array([0, 1, 2, 0])
    third, peaked = np.full(3, 1 / 3), np.array([0.5, 0.25, 0.25])
    p = np.array([peaked, third, third, peaked, third])  # root, after A, A B, A C, A C E
    law = _hsd_law(tokens, FORK, p)
    first = _first_two(law, tokens)
    expected = {(0, 0): 3 / 14, (0, 1): 1 / 6, (0, 2): 5 / 42, (1,): 0.25, (2,): 0.25}
    assert set(first) == set(expected)
    for key, value in expected.items():
        assert first[key] == pytest.approx(value, abs=1e-12), key
    whole = sum(share for (nodes, _), share in law.items() if list(nodes) == [0, 2, 3])
    assert whole == pytest.approx(1 / 12, abs=1e-12)


def test_eagle3_hsd_tree_falls_back_to_a_drafted_token_when_the_deficit_is_empty() -> None:
    """V = 2, A = 0, B = 0, C = 1, E = 0, uniform target everywhere: after A and a refused B
    the residual is all on C (a1 = 1), so the sibling path's level 0 owes nothing; the code
    then emits the drafted token after C, E = 0, right after A. By hand: (A, B) kept 1/4;
    path 2 after a refused B (1/4): the whole (C, E) 1/2, level 1 (1/4) / (3/4) = 1/3 of the
    rest, level 0 the other 2/3: (A, then E) 1/4 * 1/2 * 2/3 = 1/12, and the stream starts
    (0, 0) with 1/4 + 1/12 = 1/3 and (0, 1) with 1/8 + 1/24 = 1/6 instead of 1/4 each."""
    tokens = np.array([0, 0, 1, 0])
    p = np.full((5, 2), 0.5)
    law = _hsd_law(tokens, FORK, p)
    assert law[((0,), 0)] == pytest.approx(1 / 12, abs=1e-12)
    first = _first_two(law, tokens)
    assert first[(0, 0)] == pytest.approx(1 / 3, abs=1e-12)
    assert first[(0, 1)] == pytest.approx(1 / 6, abs=1e-12)
    assert first[(1,)] == pytest.approx(0.5, abs=1e-12)


def _fork_case():
    """FORK drafted without replacement: A from (1/2, 1/2, 0), A's two children the two tokens
    other than A in either order, E from (1/2, 1/2, 0); target (2/5, 2/5, 1/5) at the root and
    after two tokens, uniform after one and after three."""
    from otlp.referee.cases import TreeCase

    fifths, half, third = np.array([0.4, 0.4, 0.2]), np.array([0.5, 0.5, 0.0]), np.full(3, 1 / 3)
    after_one = np.array([[0.0, 0.5, 0.5], [0.5, 0.0, 0.5], [0.5, 0.5, 0.0]])
    target = (
        fifths[None],
        np.tile(third, (3, 1)),
        np.tile(fifths, (9, 1)),
        np.tile(third, (27, 1)),
    )
    draft = (half[None], after_one, np.tile(half, (9, 1)), np.tile(half, (27, 1)))
    return TreeCase(target, draft, FORK, "without_replacement")


def test_eagle3_hsd_tree_deviates_by_6_115_over_the_drafting() -> None:
    """Every drafted tree of :func:`_fork_case` has w = 2/5, a1 = 1/2 (B and C share A's
    uniform law), a2 = 2/5 and P_1 - P_2 = 4/15; its only surplus is on (A, the third token):
    4/15 ((1 - a1 a2)(1 - w a1) / (1 - w a1 a2) - (1 - a1)) = 4/15 * 9/46 = 6/115 (by hand),
    and the trees' deviations share their signs, so the referee's exact TV over the drafting is
    6/115."""
    assert _exact_deviation("eagle3_hsd_tree", _fork_case()) == pytest.approx(6 / 115, abs=1e-12)
    verdict = otlp.referee.referee(SUBJECTS["sequoia_tree"].sampler, cases=[_fork_case()])
    assert verdict.lossless and verdict.exact_cases == 1


def test_eagle3_hsd_tree_is_exact_two_deep_and_caught_three_deep() -> None:
    """At the referee's default shapes (two deep at most) the rule is exact on all 60 cases; with
    the subject's own shapes (the three-deep fork3 and fork3x2 added) it deviates, exactly, on a
    three-deep tree."""
    from otlp.referee.generate import DEFAULT_SHAPES

    subject = SUBJECTS["eagle3_hsd_tree"]
    shallow = otlp.referee.referee(subject.sampler, shapes=DEFAULT_SHAPES)
    assert shallow.lossless and shallow.exact_cases == 60
    verdict = otlp.referee.referee(subject.sampler)
    assert verdict.status == "deviation" and verdict.statistical_cases == 0
    assert verdict.failure is not None and verdict.failure.case.depth == 3
    # the table's minimal case (docs/referee.md, docs/hsd.md): V = 2, FORK, TV 0.0077
    assert verdict.failure.case.vocab == 2
    np.testing.assert_array_equal(verdict.failure.case.parents, FORK)
    assert round(verdict.failure.tv, 4) == 0.0077


def test_eagle3_hsd_tree_never_accepts_more_than_eagle_s_own_rule_on_a_fixed_tree() -> None:
    """With the draft certain, a lossless rule keeps a node only when the emitted stream starts
    with its path, so its expected accepted length on a fixed tree is at most the target mass
    of the tree's paths, which EAGLE's own rule attains. EAGLE-3H's rule stays at or below it
    (it under-accepts sibling paths), on random targets."""
    from otlp.referee import symbolic

    parents, tokens = np.array([-1, 0, 0, 1, 2]), np.array([0, 1, 2, 0, 1])
    rng = np.random.default_rng(5)
    gaps = []
    for _ in range(20):
        p = rng.dirichlet(np.full(3, 0.5), size=6)
        lengths = []
        for name in ("eagle3_hsd_tree", "eagle_target_only_tree"):
            law = symbolic.exact_law(
                lambda g, s=SUBJECTS[name].sampler, p=p: s(tokens, parents, p, p, g),
                key=symbolic.tree_key,
            )
            lengths.append(sum(share * len(nodes) for (nodes, _), share in law.items()))
        gaps.append(lengths[0] - lengths[1])
    assert max(gaps) < 1e-12 and min(gaps) < -0.01
