"""Multi-step verification ([GBV]; [GR] Appendix R): L-token drafts and K paths.

* Models: any callable prefix -> next-token law; small exact ones in :mod:`.models`.
* Methods (:data:`METHODS`): token-wise speculative sampling, block verification, greedy
  multi-path block verification (GBV) and SpecTr-style tree traversal with any single-step
  verifier (:mod:`.verifiers`); Traversal Verification and Hierarchical Speculative Decoding
  (:mod:`.hsd`) on one path.
* Exact per-call laws by enumeration (:func:`output_law`, :func:`expected_accepted`,
  :func:`output_distribution`), Monte Carlo decoding (:func:`simulate`), and the single- and
  multi-path LPs of [GBV] (:func:`single_path_lp`, :func:`multi_path_lp`), and Theorem 4.6's
  optimal path selection on tiny trees (:func:`optimal_path_selection`).
* The optimum of every valid verification algorithm for a tree drafting law (K paths, k-ary
  trees, i.i.d. or without replacement), as one exact LP on tiny trees
  (:func:`optimal_block_efficiency`), and an upper bound on it for any vocabulary and real
  models, evaluated on the prefixes it expands (:func:`block_efficiency_bound`); a tree
  rule's exact block efficiency on the same law is
  :func:`otlp.verification.rule_block_efficiency` (the rules live there).
"""

from otlp.multistep.bound import BlockEfficiencyBound, block_efficiency_bound
from otlp.multistep.exact import (
    METHODS,
    expected_accepted,
    output_distribution,
    output_law,
    skewed_table,
    target_distribution,
)
from otlp.multistep.gbv import RANKINGS
from otlp.multistep.law import OutputLaw
from otlp.multistep.lp import (
    BlockLPResult,
    NodeSpace,
    antichain_violations,
    budget_violation,
    enumerate_antichains,
    multi_path_lp,
    single_path_lp,
)
from otlp.multistep.models import (
    MODEL_KINDS,
    AutoregressiveModel,
    NGramModel,
    TabularModel,
    markov_model,
    model_pair,
)
from otlp.multistep.optimal import OptimalSelection, optimal_path_selection
from otlp.multistep.optimum import (
    TreeOptimum,
    optimal_block_efficiency,
    tree_optimum,
)
from otlp.multistep.simulate import SimulationResult, simulate
from otlp.multistep.sweep import EfficiencyRow, efficiency_sweep
from otlp.multistep.table import PrefixTable, tabulate
from otlp.multistep.verifiers import PlanVerifier, SingleStepVerifier, get_verifier

__all__ = [
    "METHODS",
    "MODEL_KINDS",
    "RANKINGS",
    "AutoregressiveModel",
    "BlockEfficiencyBound",
    "BlockLPResult",
    "EfficiencyRow",
    "NGramModel",
    "NodeSpace",
    "OptimalSelection",
    "OutputLaw",
    "PlanVerifier",
    "PrefixTable",
    "SimulationResult",
    "SingleStepVerifier",
    "TabularModel",
    "TreeOptimum",
    "antichain_violations",
    "block_efficiency_bound",
    "budget_violation",
    "efficiency_sweep",
    "enumerate_antichains",
    "expected_accepted",
    "get_verifier",
    "markov_model",
    "model_pair",
    "multi_path_lp",
    "optimal_block_efficiency",
    "optimal_path_selection",
    "output_distribution",
    "output_law",
    "simulate",
    "single_path_lp",
    "skewed_table",
    "tabulate",
    "target_distribution",
    "tree_optimum",
]
