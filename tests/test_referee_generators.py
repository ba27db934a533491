"""The generator a sampler asks for (issue 35 item 3): torch and Python samplers, seeded by the
referee, pass at ε = 0.01 without a false alarm; a lossy one is caught; the exact mode says why
it gave up; the global generators get their states back."""

from __future__ import annotations

import random

import numpy as np
import pytest

from otlp.referee import NotEnumerable, referee
from otlp.referee.generators import Generators, HandedGenerator, checked_kind

torch = pytest.importorskip("torch")


def _single_draft(p, q, drafts, generator, *, update=True):
    """A batched single-draft rejection sampler in torch: accept x with min(1, p/q), else the
    residual (p itself when ``update`` is False: lossy)."""
    p, q, x = torch.from_numpy(p), torch.from_numpy(q), torch.from_numpy(drafts[:, 0])
    rows = torch.arange(p.shape[0])
    u = torch.rand(p.shape[0], generator=generator, dtype=torch.float64)
    accept = u * q[rows, x] < p[rows, x]
    left = torch.clamp(p - q, min=0) if update else p.clone()
    left = torch.where(left.sum(1, keepdim=True) > 0, left, p)
    other = torch.multinomial(left, 1, generator=generator)[:, 0]
    return torch.where(accept, x, other).numpy()


def torch_generator(p, q, drafts, rng):
    return _single_draft(p, q, drafts, rng)


def torch_global(p, q, drafts, rng):
    assert rng is None
    return _single_draft(p, q, drafts, None)


def torch_global_no_update(p, q, drafts, rng):
    return _single_draft(p, q, drafts, None, update=False)


for _sampler, _kind in (
    (torch_generator, "torch"),
    (torch_global, "torch-global"),
    (torch_global_no_update, "torch-global"),
):
    _sampler.batched, _sampler.max_children, _sampler.rng = True, 1, _kind


def python_random(p, q, drafts, rng):
    """Lossless, drawing from Python's global generator (rng is None)."""
    x = int(drafts[0])
    if random.random() * q[x] < p[x]:
        return x
    left = np.maximum(p - q, 0.0)
    left = left if left.sum() > 0 else p
    return random.choices(range(p.shape[0]), weights=left.tolist())[0]


python_random.rng, python_random.max_children = "python", 1


@pytest.mark.parametrize("sampler", [torch_generator, torch_global], ids=lambda s: s.__name__)
def test_lossless_torch_samplers_pass_at_the_default_epsilon(sampler):
    verdict = referee(sampler, cases=12)
    assert verdict.status == "lossless", verdict.summary()
    assert verdict.epsilon == 0.01 and verdict.confirm_plan is not None
    assert verdict.statistical_cases == 12 and verdict.exact_cases == 0
    assert f"rng={sampler.rng!r}" in verdict.not_enumerable


def test_a_lossy_torch_sampler_is_caught():
    verdict = referee(torch_global_no_update, cases=12)
    assert verdict.status == "deviation" and verdict.failure.kind == "statistical"


def test_python_global_sampler_passes_and_the_states_are_restored():
    random.seed(123)
    python_state = random.getstate()
    torch.manual_seed(7)
    torch_state = torch.random.get_rng_state()
    verdict = referee(python_random, cases=4, epsilon=0.05)
    assert verdict.status == "lossless", verdict.summary()
    assert referee(torch_global, cases=2, epsilon=0.05).status == "lossless"
    assert random.getstate() == python_state
    assert torch.equal(torch.random.get_rng_state(), torch_state)


def test_per_row_torch_generators_on_a_chain_layout():
    from tests.test_referee_layouts import chain_rejection

    def per_row(draft_token_ids, target_probs, draft_probs, rng):
        assert isinstance(rng, list) and len(rng) == draft_token_ids.shape[0]
        assert all(isinstance(g, torch.Generator) for g in rng)
        numpy_rngs = [
            np.random.default_rng(int(torch.randint(2**62, (1,), generator=g))) for g in rng
        ]
        return np.concatenate(
            [
                chain_rejection(
                    draft_token_ids[b : b + 1],
                    target_probs[b : b + 1],
                    draft_probs[b : b + 1],
                    numpy_rngs[b],
                )
                for b in range(len(rng))
            ]
        )

    per_row.rng = "torch-rows"
    verdict = referee(per_row, protocol="chain", cases=3, epsilon=0.05, shapes=("chain1",))
    assert verdict.status == "lossless", verdict.summary()
    assert "torch-rows" in verdict.not_enumerable


def test_rows_get_distinct_generators_seeded_once():
    gens = Generators("torch-rows")
    rng = np.random.default_rng(0)
    first = gens.for_call(rng, 3)
    again = gens.for_call(rng, 2)
    assert again == first[:2] and len({id(g) for g in first}) == 3
    assert gens.for_call(rng, 4)[:3] == first


def test_the_exact_mode_gives_up_on_a_generator_it_did_not_hand():
    from otlp.referee.symbolic import BranchingGenerator, _Run

    handed = HandedGenerator(torch_generator, Generators("torch"))
    with pytest.raises(NotEnumerable, match="rng='torch'"):
        handed(
            np.ones((1, 2)) / 2,
            np.ones((1, 2)) / 2,
            np.zeros((1, 1), int),
            BranchingGenerator(_Run([])),
        )


def test_the_generator_kind_is_checked():
    assert checked_kind("torch-global") == "torch-global"
    with pytest.raises(ValueError, match="rng: expected one of numpy"):
        referee(torch_generator, rng=np.random.default_rng(0))  # type: ignore[arg-type]


def test_exact_mode_with_a_numpy_sampler_is_unchanged_by_the_rng_argument():
    from tests.test_referee import target_only_tree

    verdict = referee(target_only_tree, protocol="tree", cases=4, rng="numpy")
    assert verdict.exact_cases == 4 and verdict.status == "lossless"
