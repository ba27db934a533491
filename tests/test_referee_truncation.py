"""The referee's truncating logits (issue 35 item 1, ``truncate = True``): the engines' top-k and
top-p really remove mass, the law to sample is the truncated one, a sampler truncating by vLLM's
and transformers' convention passes, and one truncating another way is a deviation with a
minimal case."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from otlp.referee import engines, referee
from otlp.referee.generate import CHAIN_SHAPES, TREE_SHAPES, tree_cases
from otlp.referee.logits import TEMPERATURES, truncating
from otlp.verification.engine_layouts import target_laws

ROOT = Path(__file__).resolve().parents[1]


def _softmax(z):
    with np.errstate(invalid="ignore"):
        z = np.exp(z - z.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def _top_k_mask(values, k, exactly_k):
    """vLLM's top-k: keep the logits at least the k-th largest (``exactly_k``: k of them)."""
    if exactly_k:
        mask = np.zeros(values.shape[0], dtype=bool)
        mask[np.argsort(-values, kind="stable")[:k]] = True
        return mask
    return values >= np.sort(values)[values.shape[0] - k]


def _top_p_mask(values, p, crossing):
    """vLLM's top-p: ascending sort, drop where the cumulative softmax is <= 1 - p, the largest
    kept (``crossing=False``: drop where the mass from the top through the token exceeds p)."""
    order = np.argsort(values, kind="stable")
    law = _softmax(values[order])
    through = np.cumsum(law)
    dropped = through <= 1 - p if crossing else through - law < 1 - p
    dropped[-1] = False
    mask = np.ones(values.shape[0], dtype=bool)
    mask[order[dropped]] = False
    return mask


def engine_laws(
    logits,
    temperature,
    top_k,
    top_p,
    *,
    crossing=True,
    late_temperature=False,
    top_p_first=False,
    exactly_k=False,
):
    """The law an engine samples from logits (B, C, V), written as vLLM's
    ``apply_sampling_constraints`` and ``apply_top_k_top_p_pytorch`` compute it, with switches
    for other ways: ``crossing=False`` drops the token that crosses top_p,
    ``late_temperature`` applies top-k / top-p before the temperature, ``top_p_first`` applies
    top-p before top-k, ``exactly_k`` keeps k tokens however the k-th is tied."""
    out = np.empty_like(logits)
    for b in range(logits.shape[0]):
        t, k, p = float(temperature[b]), int(top_k[b]), float(top_p[b])
        for c, raw in enumerate(logits[b]):
            scaled = raw if late_temperature else raw / t
            if top_p_first:
                kept = _top_p_mask(scaled, p, crossing)
                kept &= _top_k_mask(np.where(kept, scaled, -np.inf), k, exactly_k)
            else:
                kept = _top_k_mask(scaled, k, exactly_k)
                kept &= _top_p_mask(np.where(kept, scaled, -np.inf), p, crossing)
            out[b, c] = _softmax(np.where(kept, raw / t, -np.inf))
    return out


def vllm_on(**how):
    """vLLM's chain rule on the law :func:`engine_laws` gives (the bonus drawn by the referee)."""

    def sampler(
        draft_token_ids, logits, draft_probs, rng, temperature, top_k, top_p, bonus_token_ids
    ):
        laws = engine_laws(logits, temperature, top_k, top_p, **how)
        return engines.vllm_rejection_sampler(
            laws, bonus_token_ids, draft_probs, draft_token_ids, rng
        )

    sampler.logits, sampler.truncate, sampler.bonus = True, True, "referee"
    sampler.__qualname__ = "vllm_" + ("_".join(how) or "convention")
    return sampler


def _rows(count=30, shapes=CHAIN_SHAPES):
    for case in tree_cases(count, "iid", 0, shapes=shapes, truncated=True):
        for tokens, _ in case.drafts():
            p, _ = case.context_laws(tokens)
            yield tokens[None], p[None]


def test_truncated_cases_have_zero_mass_at_every_context():
    cases = tree_cases(40, "iid", 0, truncated=True)
    assert {c.vocab for c in cases} == {3, 4}
    for case in cases:
        assert all(np.all((t == 0).sum(axis=1) >= 1) for t in case.target_tables), case.label
        assert "truncated" in case.label


def test_the_truncation_gives_back_the_target_and_removes_mass():
    """By otlp's conversion and by the engine-style one alike, the truncated law is the case's
    target to rounding; the softmax alone is not (mass removed), by each of top-p (T = 0.7),
    top-k (T = 1) and top-p after top-k (T = 1.6)."""
    removed = {t: 0 for t in TEMPERATURES}
    rows = {t: 0 for t in TEMPERATURES}
    after_top_k = 0
    for tokens, p in _rows(shapes=tuple(TREE_SHAPES)):
        logits, sampling = truncating(tokens, p)
        np.testing.assert_allclose(target_laws(logits, **sampling), p, atol=1e-12)
        np.testing.assert_allclose(engine_laws(logits, **sampling), p, atol=1e-12)
        t = float(sampling["temperature"][0])
        rows[t] += 1
        removed[t] += bool(np.abs(_softmax(logits / t) - p).max() > 1e-6)
        if t == 1.6 and sampling["top_p"][0] < 1:
            only_k = target_laws(logits, sampling["temperature"], sampling["top_k"])
            after_top_k += bool(np.abs(only_k - p).max() > 1e-6)
    assert all(removed[t] > rows[t] / 4 for t in TEMPERATURES), (removed, rows)
    assert after_top_k > rows[1.6] / 10, (after_top_k, rows)


def test_a_sampler_truncating_by_the_convention_passes():
    verdict = referee(vllm_on(), protocol="chain", cases=20)
    assert verdict.status == "lossless" and verdict.exact_cases == 20, verdict.summary()
    assert "truncate = True" in verdict.summary()
    assert all("truncated" in row.label for row in verdict.gap)

    def eagle(candidates, logits, draft_probs, rng, temperature, top_k, top_p):
        return engines.eagle_evaluate_posterior(logits, candidates, temperature, top_k, top_p, rng)

    eagle.truncate, eagle.bonus = True, "referee"
    verdict = referee(eagle, protocol="paths", cases=12)
    assert verdict.status == "lossless" and verdict.exact_cases == 12, verdict.summary()


@pytest.mark.parametrize(
    ("how", "vocab", "tv"),
    [({"crossing": False}, 2, 0.5), ({"late_temperature": True}, 3, 1 / 11)],
    ids=["crossing token dropped", "top-p before the temperature"],
)
def test_a_sampler_truncating_otherwise_is_a_deviation_with_a_minimal_case(how, vocab, tv):
    """docs/referee.md's minimal cases: the crossing token dropped, V = 2, TV 0.5; top-p
    before the temperature, V = 3, TV 0.09091 (1/11)."""
    verdict = referee(vllm_on(**how), protocol="chain")
    assert verdict.status == "deviation" and verdict.failure.kind == "exact", verdict.summary()
    minimal = verdict.failure.case
    assert minimal.vocab == vocab and minimal.parents.tolist() == [-1], minimal.describe()
    assert verdict.failure.tv > 0.05
    assert verdict.failure.tv == pytest.approx(tv, abs=1e-12)
    assert verdict.original.case.vocab >= minimal.vocab


@pytest.mark.parametrize(
    "how", [{"top_p_first": True}, {"exactly_k": True}], ids=["top-p before top-k", "k exactly"]
)
def test_truncation_catches_what_the_whole_support_misses(how):
    """Keeping the whole support, top-k / top-p order and ties at the k-th cannot show;
    truncating, they are deviations."""
    sampler = vllm_on(**how)
    assert referee(sampler, protocol="chain", cases=30).status == "deviation"
    sampler.truncate = False
    assert referee(sampler, protocol="chain", cases=30).status == "lossless"


def test_the_truncate_option_is_checked():
    def chain(*args):
        raise AssertionError("never called")

    chain.logits, chain.truncate = True, "yes"
    with pytest.raises(ValueError, match="truncate: expected True or False"):
        referee(chain, protocol="chain", cases=1)
    chain.logits, chain.truncate = False, True
    with pytest.raises(ValueError, match="truncate: needs logits=True"):
        referee(chain, protocol="chain", cases=1)
    del chain.logits  # SGLang's kernel takes probabilities
    with pytest.raises(ValueError, match="truncate: needs logits=True"):
        referee(chain, protocol="sglang_tree", cases=1)


def test_the_docs_show_a_truncating_example_of_at_most_ten_lines():
    page = (ROOT / "docs" / "referee.md").read_text()
    examples = [b for b in re.findall(r"```python\n(.*?)```", page, re.DOTALL) if ".truncate" in b]
    assert examples, "no truncate example on docs/referee.md"
    for block in examples:
        code = [ln for ln in block.splitlines() if ln.strip() and not ln.startswith("#")]
        assert len(code) <= 10, f"{len(code)} lines: {block}"
