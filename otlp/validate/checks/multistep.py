"""[GBV] block and multi-path verification, and [GR] Theorem R.1 (multi-step error)."""

from __future__ import annotations

import numpy as np

from otlp.multistep import (
    MODEL_KINDS,
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
from otlp.multistep.lp import phi
from otlp.validate.registry import Case, Outcome, at_most, check


def _models(case: Case, max_vocab: int = 3, max_gamma: int = 3, kinds=MODEL_KINDS):
    rng = case.rng
    kind = str(rng.choice(list(kinds)))
    vocab, gamma = int(rng.integers(2, max_vocab + 1)), int(rng.integers(1, max_gamma + 1))
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
