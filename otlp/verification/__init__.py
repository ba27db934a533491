"""Verifying drafts at a decoder's call: the token(s) a decoder emits given its drafts.

One home for everything a decoder calls once per step after the target forward; the decode
loop (:mod:`otlp.decoding`) sits above it and nothing here imports the loop.

* :mod:`.position` — :func:`verify_drafts`: B rows of full-vocabulary (p, q) and the n
  drafted ids of each row to one verified token per row ([GR] §6 fused rows, exact rules);
  :mod:`.position_schemes` — the methods each scheme beyond i.i.d. takes and the checks
  of its drafts (what every path shares is in :mod:`otlp.decoder_rows`, global resolution's
  rows in :mod:`otlp.global_resolution.rows`);
  :mod:`.warming` — :func:`warm_up`, compiling ahead what a budgeted call runs.
* :mod:`.tree` — :func:`verify_tree` / :func:`verify_chain`: the accepted path and the bonus
  token per row of a batch of draft trees (node-by-node rules with SpecTr traversal, block
  verification, GBV); :mod:`.laws` reads only the contexts a verification visits.
* :mod:`.rule_table` — every rule declared once (name, protocol, schemes, kernel);
  :mod:`.node_steps` — each node rule's exact law and token.
* :mod:`.shapes` — static draft-tree shapes as parent arrays; :mod:`.drafting` — drafting a
  node's children under the schemes the tree verifier accepts (and the per-row randomness
  both use).

(:mod:`otlp.verify` is a different thing: it checks transport plans, not decoder rows.)
"""

from otlp.verification.drafting import (
    SCHEMES,
    children_probability,
    restrict_top_k,
    sample_children,
)
from otlp.verification.node_steps import node_law
from otlp.verification.position import DraftVerification, default_method, verify_drafts
from otlp.verification.shapes import (
    ancestors,
    chain,
    check_parents,
    children,
    depth,
    k_ary_tree,
    path_shape,
    path_tree,
)
from otlp.verification.tree import (
    METHODS,
    NODE_METHODS,
    PATH_METHODS,
    SCHEMES_OF,
    TreeVerification,
    outcome_law,
    verify_chain,
    verify_tree,
)
from otlp.verification.tree_exact import rule_block_efficiency
from otlp.verification.warming import warm_up

__all__ = [
    "METHODS",
    "NODE_METHODS",
    "PATH_METHODS",
    "SCHEMES",
    "SCHEMES_OF",
    "DraftVerification",
    "TreeVerification",
    "ancestors",
    "chain",
    "check_parents",
    "children",
    "children_probability",
    "default_method",
    "depth",
    "k_ary_tree",
    "node_law",
    "outcome_law",
    "path_shape",
    "path_tree",
    "restrict_top_k",
    "rule_block_efficiency",
    "sample_children",
    "verify_chain",
    "verify_drafts",
    "verify_tree",
    "warm_up",
]
