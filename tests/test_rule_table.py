"""The rule table (otlp.verification.rule_table): every method list reads it, and a new rule is
one entry plus its kernel."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import otlp.verification
from otlp.decoding.grid import SAME_AT_ONE_PATH, valid
from otlp.referee import adapters
from otlp.verification import position, position_schemes, rule_table, tree
from otlp.verification.rule_table import RULES, NodeKernel, node_kernel


def test_every_node_rule_has_a_kernel_and_only_node_rules_do() -> None:
    for name, rule in RULES.items():
        if rule.protocol == "node":
            kernel = node_kernel(name)
            assert callable(kernel.law) and callable(kernel.token)
            assert (kernel.fused is None) == (kernel.fuses is None)
        else:
            with pytest.raises(KeyError):
                node_kernel(name)
    with pytest.raises(ValueError, match="is not a node rule"):
        rule_table.register_node_kernel("block", node_kernel("sps"))


def test_path_and_sequence_rules_carry_their_laws() -> None:
    for rule in RULES.values():
        assert rule.default_scheme in rule.schemes
        if rule.protocol == "path":
            assert rule.stop_law is not None and rule.tests is None
        if rule.protocol == "sequence":
            assert rule.tests is not None and rule.sequence_law is not None


def test_the_verifiers_method_lists_are_the_tables() -> None:
    assert tuple(RULES) == tree.METHODS
    assert set(tree.NODE_METHODS) | set(tree.PATH_METHODS) | set(tree.SEQUENCE_METHODS) == set(
        RULES
    )
    assert {name: rule.schemes for name, rule in RULES.items()} == tree.SCHEMES_OF
    positions = {n for n, r in RULES.items() if r.positions}
    scheme_rows = {m for methods in position_schemes.SCHEME_METHODS.values() for m in methods}
    assert set(position.METHODS) | scheme_rows == positions
    for scheme, methods in position_schemes.SCHEME_METHODS.items():
        for method in methods:
            assert scheme in RULES[method].positions
    assert set(adapters._EXACT_POSITION) <= positions
    assert not any(RULES[m].takes_tau for m in adapters._EXACT_POSITION)
    assert all(RULES[m].same_at_one_child in RULES for m in SAME_AT_ONE_PATH)


@pytest.mark.parametrize("name", list(RULES))
def test_shapes_each_rule_verifies_follow_its_entry(name: str) -> None:
    rule = RULES[name]
    assert valid(name, 1)
    assert valid(name, 3) == (rule.max_paths != 1 and rule.drafts != 2)
    assert valid(name, 1, (2, 2)) == (rule.max_paths != 1 and not rule.selects_path)


def test_a_new_node_rule_is_one_entry_and_its_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rule added to the table with a kernel runs through verify_tree and outcome_law with
    no other change: here a copy of recursive rejection sampling under a new name."""
    copy = dataclasses.replace(RULES["rrs"], name="rrs_copy")
    monkeypatch.setitem(RULES, "rrs_copy", copy)
    rrs = node_kernel("rrs")
    monkeypatch.setitem(rule_table._NODE_KERNELS, "rrs_copy", NodeKernel(rrs.law, rrs.token))
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(4), size=(5, 4))
    q = rng.dirichlet(np.ones(4), size=(5, 4))
    parents = otlp.verification.path_tree(3, 1)
    tokens = rng.integers(0, 4, size=(5, 3))
    want = otlp.verification.verify_tree(tokens, parents, p, q, method="rrs", rng=list(range(5)))
    got = otlp.verification.verify_tree(
        tokens, parents, p, q, method="rrs_copy", rng=list(range(5))
    )
    np.testing.assert_array_equal(got.output_ids, want.output_ids)
    assert otlp.verification.outcome_law(
        tokens[0], parents, p[0], q[0], method="rrs_copy"
    ) == otlp.verification.outcome_law(tokens[0], parents, p[0], q[0], method="rrs")


def test_the_decoders_results_share_the_engines_fields() -> None:
    """verify_drafts' result carries output_ids and num_accepted as verify_tree's does."""
    p = np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]])
    q = np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])
    drafts = np.array([[1, 2], [2, 2]])
    result = otlp.verification.verify_drafts(p, q, drafts, rng=0)
    assert result.output_ids.shape == (2, 1)
    np.testing.assert_array_equal(result.output_ids[:, 0], result.tokens)
    want = [int(t in row) for t, row in zip(result.tokens, drafts, strict=True)]
    assert result.num_accepted.tolist() == want
