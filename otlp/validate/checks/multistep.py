"""[GBV] block and multi-path verification, and [GR] Theorem R.1 (multi-step error)."""

from __future__ import annotations

import numpy as np

from otlp.multistep import (
    MODEL_KINDS,
    RANKINGS,
    NodeSpace,
    antichain_violations,
    budget_violation,
    enumerate_antichains,
    expected_accepted,
    model_pair,
    multi_path_lp,
    output_distribution,
    output_law,
    single_path_lp,
    skewed_table,
    tabulate,
    target_distribution,
)
from otlp.multistep.gbv import path_rank_keys, skewed_conditionals, skewed_law, tree_order
from otlp.multistep.lp import phi
from otlp.multistep.models import prefix_digits
from otlp.multistep.optimal import (
    optimal_path_selection,
    path_law_table,
    realisability_violation,
    skewed_objective,
)
from otlp.validate.registry import Case, Outcome, at_most, check, equality


def _models(
    case: Case, max_vocab: int = 3, max_gamma: int = 3, kinds=MODEL_KINDS, min_gamma: int = 1
):
    rng = case.rng
    kind = str(rng.choice(list(kinds)))
    vocab = int(rng.integers(2, max_vocab + 1))
    gamma = int(rng.integers(min_gamma, max_gamma + 1))
    sparsity, distance = float(rng.choice([0.0, 0.3, 0.6])), float(rng.choice([0.0, 0.3, 0.9]))
    seed = int(rng.integers(10**6))
    case.record(
        kind=kind, vocab=vocab, gamma=gamma, sparsity=sparsity, distance=distance, model_seed=seed
    )
    target, draft = model_pair(
        kind, vocab, seed=seed, distance=distance, sparsity=sparsity, depth=gamma + 1
    )
    return target, draft, gamma


@check(
    "gbv.def3_1.target_matching",
    "GBV",
    "Def. 3.1",
    "token-wise, block, GBV and tree traversal are target-matching: output + target "
    "continuation has the target's law on the first L + 1 tokens",
    cost=0.25,
    suite=False,
)
def _target_matching(case: Case) -> Outcome:
    target, draft, gamma = _models(case)
    paths = int(case.rng.integers(1, 4))
    expected = target_distribution(target, gamma + 1)
    runs = [("gbv", paths), ("spectr", paths), ("token", 1), ("block", 1)]
    worst = max(
        float(np.abs(output_distribution(target, draft, gamma, m, k) - expected).sum())
        for m, k in runs
    )
    return at_most(worst, 0.0, 1e-11)


@check(
    "gbv.thm3_4.block_is_single_path_optimal",
    "GBV",
    "Thms 3.3, 3.4",
    "block verification attains the single-path LP optimum, and dominates token-wise",
    cost=0.25,
    suite=False,
)
def _bv_optimal(case: Case) -> Outcome:
    target, draft, gamma = _models(case, max_gamma=4)
    lp = single_path_lp(target, draft, gamma)
    block = expected_accepted(target, draft, gamma, "block")
    token = expected_accepted(target, draft, gamma, "token")
    return Outcome(min(1e-7 - abs(block - lp.expected_accepted), block - token + 1e-12))


@check(
    "gbv.thm4_3.methods_below_antichain_lp",
    "GBV",
    "Thm 4.3",
    "GBV's and the traversal's node budgets are feasible in the K-path antichain LP, so "
    "their block efficiency is at most its optimum",
    cost=0.15,
    suite=False,
)
def _below_lp(case: Case) -> Outcome:
    target, draft, gamma = _models(case)
    paths = int(case.rng.integers(2, 4))
    tgt, dft = tabulate(target, gamma + 1), tabulate(draft, gamma)
    lp = multi_path_lp(tgt, dft, gamma, paths)
    margin = 1e-7 - lp.max_violation
    for method in ("gbv", "spectr"):
        law = output_law(tgt, dft, gamma, method, paths)
        margin = min(
            margin,
            lp.expected_accepted + 1e-7 - law.expected_accepted,
            1e-9 - budget_violation(law.node_budgets(tgt), tgt, dft, paths),
        )
    return Outcome(float(margin))


@check(
    "gbv.lemma4_5.skewed_draft_antichains",
    "GBV",
    "Lemma 4.5",
    "GBV's skewed draft satisfies EVERY antichain inequality (all antichains enumerated), "
    "tight on full levels",
    cost=0.25,
    suite=False,
)
def _lemma45(case: Case) -> Outcome:
    target, draft, gamma = _models(case, max_vocab=3, max_gamma=2)
    tgt, dft = tabulate(target, gamma + 1), tabulate(draft, gamma)
    space = NodeSpace(tgt.vocab_size, gamma)
    masks = enumerate_antichains(space)
    paths = int(case.rng.integers(1, 4))
    skewed = space.masses(skewed_table(tgt, dft, gamma, paths))
    slack = float((phi(masks @ space.masses(dft), paths) - masks @ skewed).min())
    level = max(abs(skewed[space.level(d)].sum() - 1.0) for d in range(1, gamma + 1))
    oracle = antichain_violations(skewed, space.masses(dft), space, paths)[0][1]
    return Outcome(min(slack + 1e-12, 1e-12 - level, 1e-12 - oracle), {"slack": slack})


@check(
    "gbv.antichain_lp.lazy_equals_all",
    "GBV",
    "Thm 4.3 (LP)",
    "the antichain LP with lazily separated constraints equals the LP with every antichain",
    cost=0.1,
    suite=False,
)
def _lazy(case: Case) -> Outcome:
    target, draft, gamma = _models(case, max_vocab=2, max_gamma=2)
    paths = int(case.rng.integers(2, 4))
    lazy = multi_path_lp(target, draft, gamma, paths)
    full = multi_path_lp(target, draft, gamma, paths, constraints="all")
    return Outcome(1e-7 - abs(lazy.expected_accepted - full.expected_accepted))


def _tiny(case: Case):
    """A tiny tree for Theorem 4.6 (V = 2-3, L = 1-2, at most 9 paths) and K in 2..3."""
    target, draft, gamma = _models(case, max_vocab=3, max_gamma=2)
    paths = int(case.rng.integers(2, 4))
    case.record(paths=paths)
    return tabulate(target, gamma + 1), tabulate(draft, gamma), gamma, paths


def _random_vertex(case: Case, draft_paths: np.ndarray, paths: int) -> np.ndarray:
    """The skewed draft of a uniformly random global ranking (a base-polytope vertex)."""
    return skewed_law(draft_paths, case.rng.permutation(draft_paths.shape[0]), paths)


@check(
    "gbv.thm4_6.optimum_between_gbv_and_lp",
    "GBV",
    "Thm 4.6",
    "the optimal path selection + block verification (best realisable skewed draft, exact "
    "LP) is realisable, is attained by block verification on its q~, beats GBV (both "
    "tree-based rankings) and every greedy ranking, and is at most the antichain LP",
    cost=0.25,
    suite=False,
)
def _thm46_between(case: Case) -> Outcome:
    tgt, dft, gamma, paths = _tiny(case)
    opt = optimal_path_selection(tgt, dft, gamma, paths)
    lp = multi_path_lp(tgt, dft, gamma, paths)
    table = path_law_table(opt.skewed, tgt.vocab_size, gamma)
    attained = output_law(tgt, table, gamma, "block").expected_accepted
    gbv = max(expected_accepted(tgt, dft, gamma, "gbv", paths, ranking=r) for r in RANKINGS)
    vertex = skewed_objective(tgt, _random_vertex(case, dft.joint(gamma), paths), gamma)
    value = opt.expected_accepted
    margin = min(
        value + 1e-9 - max(gbv, vertex),
        lp.expected_accepted + 1e-7 - value,
        1e-9 - abs(attained - value),
        1e-9 - realisability_violation(opt.skewed, dft.joint(gamma), paths),
    )
    return Outcome(margin, {"optimum": value, "gbv": gbv, "lp": lp.expected_accepted})


@check(
    "gbv.thm4_6.equals_antichain_lp",
    "GBV",
    "Thms 4.3, 4.6",
    "Theorem 4.6's optimum equals the antichain LP optimum of Theorem 4.3 (Lemma 4.4 + "
    "Theorem 3.4: no valid algorithm beats path selection + block verification)",
    cost=0.25,
    suite=False,
)
def _thm46_lp(case: Case) -> Outcome:
    tgt, dft, gamma, paths = _tiny(case)
    opt = optimal_path_selection(tgt, dft, gamma, paths).expected_accepted
    return equality(opt, multi_path_lp(tgt, dft, gamma, paths).expected_accepted, 1e-7)


@check(
    "gbv.thm4_6.objective_concave",
    "GBV",
    "Thm 4.6 (Eqs. 21-23)",
    "block verification's efficiency F(q~) (closed form = exact BV law) is concave on the "
    "realisable skewed drafts: F(t a + (1 - t) b) >= t F(a) + (1 - t) F(b) for greedy "
    "vertices a, b, so the optimum is an LP, not a nonconvex program",
    cost=0.5,
    suite=False,
)
def _thm46_concave(case: Case) -> Outcome:
    tgt, dft, gamma, paths = _tiny(case)
    a, b = (_random_vertex(case, dft.joint(gamma), paths) for _ in range(2))
    t = float(case.rng.random())
    mid = t * a + (1 - t) * b
    value = skewed_objective(tgt, mid, gamma)
    law = output_law(tgt, path_law_table(mid, tgt.vocab_size, gamma), gamma, "block")
    chord = t * skewed_objective(tgt, a, gamma) + (1 - t) * skewed_objective(tgt, b, gamma)
    closed_form = 1e-10 - abs(law.expected_accepted - value)
    return Outcome(min(value - chord + 1e-12, closed_form), {"gain": value - chord})


@check(
    "gbv.lemma4_7.lower_bound",
    "GBV",
    "Lemma 4.7 (Eq. 24)",
    "for a realisable q~ block verification accepts E[tau] >= L min(1, r), r = min over "
    "paths of q~(x) / M_b(x) (so efficiency >= (L + 1) min(1, r)); checked at Theorem 4.6's "
    "optimum, at GBV's skewed draft and at a random greedy ranking",
    cost=0.25,
    suite=False,
)
def _lemma47(case: Case) -> Outcome:
    tgt, dft, gamma, paths = _tiny(case)
    mb = tgt.joint(gamma)
    candidates = [
        optimal_path_selection(tgt, dft, gamma, paths).skewed,
        skewed_table(tgt, dft, gamma, paths).joint(gamma),
        _random_vertex(case, dft.joint(gamma), paths),
    ]
    margin = np.inf
    for skewed in candidates:
        with np.errstate(divide="ignore", invalid="ignore"):
            r = float(np.min(np.where(mb > 0, skewed / mb, np.inf)))
        margin = min(margin, skewed_objective(tgt, skewed, gamma) + 1e-12 - gamma * min(1.0, r))
    return Outcome(float(margin))


@check(
    "gbv.eq26.skewed_ratio_increases_along_ranking",
    "GBV",
    "Eq. 26",
    "along any global ranking (lowest first) q~(x)/M_s(x) is nondecreasing, sandwiched as "
    "K a^(K-1) <= q~/M_s <= K b^(K-1) (a, b = draft mass ranked below / up to x), by the "
    "convexity of m^K; and along a tree-based ranking with q~ from the closed form Eqs. 28-29",
    cost=0.5,
    suite=False,
)
def _eq26(case: Case) -> Outcome:
    rng = case.rng
    paths = int(rng.integers(2, 5))
    mass = case.vector(int(rng.integers(2, 10)))
    order = rng.permutation(mass.shape[0])
    ranked = mass[order]
    keep = ranked > 0
    ratio = skewed_law(mass, order, paths)[order][keep] / ranked[keep]
    upper = np.cumsum(ranked)[keep]
    lower = upper - ranked[keep]
    k = paths
    monotone = float(np.min(np.diff(ratio), initial=0.0))
    sandwich = min(
        float(np.min(ratio - k * lower ** (k - 1))), float(np.min(k * upper ** (k - 1) - ratio))
    )
    # Tree-based ranking (Definition 5.2) on random models, q~ from Eqs. 28-29.
    target, draft, gamma = _models(case, max_vocab=3, max_gamma=3)
    tgt, dft = tabulate(target, gamma + 1), tabulate(draft, gamma)
    tokens = prefix_digits(np.arange(tgt.vocab_size**gamma), tgt.vocab_size, gamma)
    tc, dc = tgt.along_paths(tokens, gamma + 1), dft.along_paths(tokens, gamma)
    ranking = str(rng.choice(list(RANKINGS)))
    _, skewed = skewed_conditionals(tc, dc, tokens, paths, ranking)
    tree = tree_order(path_rank_keys(tc, dc, tokens, ranking))
    ms = dft.joint(gamma)[tree]
    tree_ratio = skewed[tree][ms > 0] / ms[ms > 0]
    tree_monotone = float(np.min(np.diff(tree_ratio), initial=0.0))
    tol = 1e-9
    return Outcome(min(monotone, sandwich, tree_monotone) + tol, {"paths": float(paths)})


@check(
    "gr.thmR_1.multistep_15_L_tau",
    "GR",
    "Thm R.1",
    "tree traversal with global resolution at tau: the law of the next L tokens is within "
    "15 L tau of the target's in L1",
    cost=0.1,
    suite=False,
)
def _thm_r1(case: Case) -> Outcome:
    import otlp.global_resolution  # noqa: F401  (registers the method)

    target, draft, gamma = _models(case, max_vocab=3, max_gamma=2, kinds=("markov",))
    tau = float(case.rng.choice([1e-2, 1e-3]))
    paths = int(case.rng.integers(2, 4))
    out = output_distribution(
        target, draft, gamma, "spectr", paths, rule="global_resolution", tau=tau
    )
    error = float(np.abs(out - target_distribution(target, gamma + 1)).sum())
    return Outcome((15 * gamma * tau - error) / tau, {"error_over_tau": error / tau})


@check(
    "tv.chain.equals_block_verification",
    "TV",
    "Thms (lossless; optimal on chains)",
    "Traversal Verification (arXiv 2505.12398) on one draft chain is target-matching and its "
    "expected accepted length equals block verification's ([GBV] Thm 3.4's optimum)",
    cost=0.25,
    suite=False,
)
def _traversal_chain(case: Case) -> Outcome:
    target, draft, gamma = _models(case, max_gamma=4)
    law = output_law(target, draft, gamma, "traversal")
    tgt = tabulate(target, gamma + 1)
    matching = float(
        np.abs(law.output_distribution(tgt) - target_distribution(tgt, gamma + 1)).sum()
    )
    block = expected_accepted(target, draft, gamma, "block")
    return Outcome(
        min(1e-11 - matching, 1e-12 - abs(law.expected_accepted - block)),
        {"traversal": law.expected_accepted, "block": block, "l1": matching},
    )


@check(
    "tv.tree.lossless",
    "TV",
    "Thm (lossless on trees)",
    "Traversal Verification of a draft tree (chains, K paths, k-ary; i.i.d. or "
    "without-replacement siblings) is target-matching on the first depth + 1 tokens",
    cost=0.1,
    suite=False,
)
def _traversal_tree(case: Case) -> Outcome:
    from otlp.verification.shapes import chain, k_ary_tree, path_tree
    from otlp.verification.shapes import depth as tree_depth
    from otlp.verification.tree_exact import call_law

    rng = case.rng
    shapes = {
        "chain2": chain(2),
        "paths2x2": path_tree(2, 2),
        "kary2x2": k_ary_tree((2, 2)),
        "kary3x1": k_ary_tree((3, 1)),
        "kary2x1x1": k_ary_tree((2, 1, 1)),
    }
    name = str(rng.choice(list(shapes)))
    scheme = str(rng.choice(["iid", "without_replacement"]))
    parents = shapes[name]
    depth = int(tree_depth(parents).max())
    kind = str(rng.choice(list(MODEL_KINDS)))
    sparsity, distance = float(rng.choice([0.0, 0.3, 0.6])), float(rng.choice([0.0, 0.3, 0.9]))
    if scheme == "without_replacement":  # k distinct children need k tokens of the draft
        sparsity = 0.0
    seed = int(rng.integers(10**6))
    case.record(shape=name, scheme=scheme, kind=kind, sparsity=sparsity, distance=distance,
                model_seed=seed)  # fmt: skip
    target, draft = model_pair(
        kind, 3, seed=seed, distance=distance, sparsity=sparsity, depth=depth + 1
    )
    law = call_law(target, draft, parents, "traversal_verification", scheme=scheme)
    gap = float(np.abs(law.extended(target) - target_distribution(target, depth + 1)).sum())
    return at_most(gap, 0.0, 1e-11, expected_accepted=law.expected_accepted)


def _hsd_case(case: Case, variant: str = "capped", min_gamma: int = 1):
    """HSD's exact law on a random tiny model (``variant``: :data:`otlp.multistep.hsd.VARIANTS`),
    with block verification's and the target's for comparison."""
    from otlp.multistep import hsd, single_path
    from otlp.multistep.exact import _all_paths
    from otlp.multistep.law import single_path_law

    target, draft, gamma = _models(case, max_gamma=4, min_gamma=min_gamma)
    tgt, dft = tabulate(target, gamma + 1), tabulate(draft, gamma)
    tokens = _all_paths(tgt.vocab_size, gamma)
    p, q = tgt.along_paths(tokens, gamma + 1), dft.along_paths(tokens, gamma)
    ours = hsd.chain(p, q, tokens, variant=variant)
    block = single_path.block(p, q, tokens)
    law = single_path_law(ours, dft.joint(gamma), tgt.vocab_size)
    l1 = float(np.abs(law.output_distribution(tgt) - target_distribution(tgt, gamma + 1)).sum())
    mass = dft.joint(gamma)[:, None]  # per-path differences count only where the draft goes
    stop_gap = float((mass * np.abs(ours.stop - block.stop)).sum())
    return law, l1, stop_gap, expected_accepted(tgt, dft, gamma, "block")


@check(
    "hsd.chain.lossless",
    "HSD",
    "lossless theorem",
    "Hierarchical Speculative Decoding (arXiv 2601.05724) on one draft chain, with every branch "
    "and the full draft's joint test capped by the running maximum of the prefix ratios, is "
    "target-matching on the first L + 1 tokens",
    suite=False,
)
def _hsd_lossless(case: Case) -> Outcome:
    law, l1, _, _ = _hsd_case(case)
    return Outcome(1e-11 - l1, {"l1": l1, "hsd": law.expected_accepted})


@check(
    "hsd.chain.vs_block",
    "HSD",
    "vs [GBV] Thm 3.4",
    "on one draft chain HSD (running-max caps) is block verification: the same stop law on "
    "every drafted path and so the same expected accepted length ([GBV] Thm 3.4's optimum)",
    suite=False,
)
def _hsd_vs_block(case: Case) -> Outcome:
    law, _, stop_gap, block = _hsd_case(case)
    gap = abs(law.expected_accepted - block)
    return Outcome(
        1e-12 - max(gap, stop_gap),
        {"hsd": law.expected_accepted, "block": block, "stop_gap": stop_gap},
    )


@check(
    "hsd.chain.joint_test_lossless",
    "HSD",
    "public code's full-draft test",
    "HSD testing the full draft on its raw joint ratio min(1, p(X_1..L) / q(X_1..L)) (the public "
    "repository's reading) is target-matching: refuted, it exceeds block verification",
    expect_fail=True,
    suite=False,
)
def _hsd_joint_test(case: Case) -> Outcome:
    law, l1, _, block = _hsd_case(case, variant="joint", min_gamma=2)
    return Outcome(1e-11 - l1, {"l1": l1, "hsd": law.expected_accepted, "block": block})
