"""Speculative decoding with otlp: the decode loop and its models.

* :mod:`.loop` — :func:`decode`: draft a tree, one target forward over it, verify, repeat.
* :mod:`.models` — the models the loop runs (Hugging Face decoders, SmolLM2, prompt lookup,
  toy prefix models); :mod:`.compare` — configurations compared on a prompt set;
  :mod:`.first_step` — every rule at the first step of a prompt, on the same drafted trees.

The verification a step calls lives one layer below, in :mod:`otlp.verification` (tree
shapes, drafting a node's children, :func:`verify_tree` / :func:`verify_chain`); its names are
re-exported here so a decode loop needs one import.
"""

from otlp.verification import (
    METHODS,
    NODE_METHODS,
    PATH_METHODS,
    SCHEMES,
    SCHEMES_OF,
    TreeVerification,
    ancestors,
    chain,
    check_parents,
    children,
    children_probability,
    depth,
    k_ary_tree,
    node_law,
    outcome_law,
    path_shape,
    path_tree,
    restrict_top_k,
    sample_children,
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
from otlp.decoding.first_step import FirstStep, measure_first_step
from otlp.decoding.loop import DecodeResult, Speculation, decode
from otlp.decoding.models import Memoized, MemoizedTreeLM, PrefixLM, TreeModel, TreeSession
from otlp.decoding.models.pair import ModelPair, load_model_pair
from otlp.decoding.models.precision import PRECISIONS, Fidelity, fidelity

__all__ += [
    "PRECISIONS",
    "DecodeResult",
    "Fidelity",
    "FirstStep",
    "Memoized",
    "MemoizedTreeLM",
    "ModelPair",
    "PrefixLM",
    "Speculation",
    "TreeModel",
    "TreeSession",
    "decode",
    "fidelity",
    "load_model_pair",
    "measure_first_step",
]
