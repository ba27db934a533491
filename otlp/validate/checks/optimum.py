"""The optimum LP over every valid verification algorithm (docs/optimum.md): every exact tree
rule of otlp stays below it, and on K i.i.d. paths it is [GBV] Theorem 4.6's optimum."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from otlp.multistep import model_pair, multi_path_lp, optimal_path_selection, tabulate
from otlp.multistep.optimum import tree_nodes, tree_optimum
from otlp.validate.registry import Case, Outcome, check, equality
from otlp.verification.rule_table import RULES
from otlp.verification.tree_exact import rule_block_efficiency

SCHEMES = ("iid", "without_replacement")


def tree_rules(scheme: str, branching: Sequence[int] = (), paths: int = 1) -> list[str]:
    """The rule table's rules that verify the tree of ``branching`` children per depth (or
    K = ``paths`` paths) drafted by ``scheme``."""
    return [
        name
        for name, rule in RULES.items()
        if scheme in rule.schemes and rule.verifies(paths, branching)
    ]


TAU = 1e-4
MAX_TREES = 729  # drafted token assignments a rule's exact law enumerates


def _tiny_models(case: Case, max_gamma: int = 2):
    rng = case.rng
    vocab, gamma = int(rng.integers(2, 4)), int(rng.integers(1, max_gamma + 1))
    sparsity, distance = float(rng.choice([0.0, 0.3])), float(rng.choice([0.3, 0.6, 0.9]))
    seed = int(rng.integers(10**6))
    case.record(vocab=vocab, gamma=gamma, sparsity=sparsity, distance=distance, model_seed=seed)
    target, draft = model_pair(
        "tree", vocab, seed=seed, distance=distance, sparsity=sparsity, depth=gamma + 1
    )
    return tabulate(target, gamma + 1), tabulate(draft, gamma), gamma


@check(
    "opt.rules_below_optimum",
    "GBV",
    "Def. 4.1 (trees)",
    "no rule of the rule table that verifies the tree (exact; global resolution within 15 "
    "tau per level) has a block efficiency above the optimum LP over every valid algorithm, "
    "on random tiny k-ary trees (i.i.d. and without replacement)",
    suite=False,
)
def _rules_below(case: Case) -> Outcome:
    tgt, dft, gamma = _tiny_models(case)
    vocab = tgt.vocab_size
    widths = [k for k in (1, 2, 3) if vocab ** tree_nodes((k,) * gamma) <= MAX_TREES]
    width = int(case.rng.choice(widths))
    schemes = ["iid"] if width > vocab or case.recorded["sparsity"] > 0 else list(SCHEMES)
    scheme = str(case.rng.choice(schemes))
    case.record(shape=f"kary{width}", scheme=scheme)
    optimum = tree_optimum(tgt, dft, gamma, shape=f"kary{width}", scheme=scheme)
    margin, values = 1.0, {"optimum": optimum.block_efficiency}
    for method in tree_rules(scheme, (width,) * gamma):
        lossy = RULES[method].takes_tau
        options: dict[str, Any] = {"tau": TAU} if lossy else {}
        value = rule_block_efficiency(
            tgt, dft, gamma, method, shape=f"kary{width}", scheme=scheme, **options
        )
        slack = 15 * TAU * gamma if lossy else 1e-9
        margin = min(margin, optimum.block_efficiency + slack - value)
        values[method] = value
    return Outcome(float(margin), values)


@check(
    "opt.paths_equals_thm4_6",
    "GBV",
    "Def. 4.1, Thms 4.3, 4.6",
    "on K i.i.d. draft paths the optimum LP over couplings of drafted trees and outputs "
    "equals Theorem 4.6's optimal path selection and the antichain LP of Theorem 4.3",
    suite=False,
)
def _paths(case: Case) -> Outcome:
    tgt, dft, gamma = _tiny_models(case)
    paths = int(case.rng.integers(1, 4))
    case.record(paths=paths)
    value = tree_optimum(tgt, dft, gamma, shape=f"paths{paths}").block_efficiency
    selection = optimal_path_selection(tgt, dft, gamma, paths).block_efficiency
    antichain = multi_path_lp(tgt, dft, gamma, paths).block_efficiency
    worst = max(abs(value - selection), abs(value - antichain))
    return equality(worst, 0.0, 1e-9, optimum=value, thm4_6=selection, thm4_3=antichain)
