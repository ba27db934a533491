"""Speculative decoding with otlp: draft trees, drafting and verification for a decode loop.

* :mod:`.tree` — static draft-tree shapes as parent arrays (chains, K paths, k-ary trees).
* :mod:`.drafting` — drafting a node's children (i.i.d., without replacement, SpecHub's hub
  joint), separate from verification.
* :mod:`.verify` — :func:`verify_tree` / :func:`verify_chain`: the accepted path and the bonus
  token per row of a batch, by any lossless method (node-by-node rules with SpecTr traversal,
  block verification, GBV).
"""

from otlp.decoding.drafting import SCHEMES, children_probability, restrict_top_k, sample_children
from otlp.decoding.tree import (
    ancestors,
    chain,
    check_parents,
    children,
    depth,
    k_ary_tree,
    path_shape,
    path_tree,
)
from otlp.decoding.verify import (
    METHODS,
    NODE_METHODS,
    PATH_METHODS,
    SCHEMES_OF,
    TreeVerification,
    node_law,
    outcome_law,
    verify_chain,
    verify_tree,
)

__all__ = [
    "METHODS",
    "NODE_METHODS",
    "PATH_METHODS",
    "SCHEMES",
    "SCHEMES_OF",
    "TreeVerification",
    "ancestors",
    "chain",
    "check_parents",
    "children",
    "children_probability",
    "depth",
    "k_ary_tree",
    "node_law",
    "outcome_law",
    "path_shape",
    "path_tree",
    "restrict_top_k",
    "sample_children",
    "verify_chain",
    "verify_tree",
]

# ----- the decode loop and its models (decode-engine) -------------------------------------
from otlp.decoding.engine import DecodeResult, Speculation, decode
from otlp.decoding.models import Memoized, PrefixLM, TreeModel, TreeSession
from otlp.decoding.models.pair import ModelPair, load_model_pair
from otlp.decoding.models.precision import PRECISIONS, Fidelity, fidelity

__all__ += [
    "PRECISIONS",
    "DecodeResult",
    "Fidelity",
    "Memoized",
    "ModelPair",
    "PrefixLM",
    "Speculation",
    "TreeModel",
    "TreeSession",
    "decode",
    "fidelity",
    "load_model_pair",
]
