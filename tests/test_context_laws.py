"""The laws at a tree's contexts are read as given (otlp.verification.laws): the whole input or
a row's contexts as a view where numpy can read them without a copy (numpy, CPU torch, float32
or float64, C-contiguous), gathered and widened rows otherwise, never a different value; sums
checked once at the input's tolerance; shapes refused naming the argument."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from otlp.verification.laws import ContextLaws

B, C, V = 2, 3, 5


def _values(dtype: type = np.float64, spread: float = 0.0) -> np.ndarray:
    """Dirichlet laws; with ``spread``, context (b, c)'s law sums to 1 + spread * (b C + c)."""
    rng = np.random.default_rng(0)
    laws = rng.dirichlet(np.ones(V), size=(B, C))
    laws *= 1.0 + spread * np.arange(B * C).reshape(B, C, 1)
    return np.ascontiguousarray(laws.astype(dtype))


VIEWABLE = [
    pytest.param(lambda: _values(np.float64), id="numpy-f64"),
    pytest.param(lambda: _values(np.float32), id="numpy-f32"),
    pytest.param(lambda: torch.from_numpy(_values(np.float64)), id="torch-f64"),
    pytest.param(lambda: torch.from_numpy(_values(np.float32)), id="torch-f32"),
]
COPIED = [
    pytest.param(lambda: _values(np.float16), id="numpy-f16"),
    pytest.param(lambda: torch.from_numpy(_values()).to(torch.bfloat16), id="torch-bf16"),
    pytest.param(lambda: torch.from_numpy(_values()).to(torch.float16), id="torch-f16"),
]


def _numpy(value: object) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.to(torch.float64).numpy()
    return np.asarray(value, dtype=np.float64)


@pytest.mark.parametrize("make", VIEWABLE)
def test_readable_inputs_are_views(make) -> None:
    value = make()
    laws = ContextLaws("p", value, (B, C), None)
    given = value.numpy() if isinstance(value, torch.Tensor) else value
    whole = laws.native_all()
    assert whole is not None and np.shares_memory(whole, given) and whole.shape == (B, C, V)
    contexts = np.array([2, 0], dtype=np.int64)
    rows, index = laws.native_rows(1, contexts)
    assert np.shares_memory(rows, given) and np.array_equal(index, contexts)
    np.testing.assert_array_equal(rows[index], given[1, contexts])
    assert np.shares_memory(laws.native(1, 2), given)


def test_a_strided_input_is_not_read_whole_but_its_rows_are_views() -> None:
    given = np.repeat(_values(), 2, axis=2)[:, :, ::2]
    laws = ContextLaws("p", given, (B, C), None)
    assert laws.native_all() is None
    rows, index = laws.native_rows(0, np.array([1]))
    assert np.shares_memory(rows, given) and rows[index[0]][3] == given[0, 1, 3]


@pytest.mark.parametrize("make", COPIED)
def test_other_inputs_are_gathered_rows_of_the_same_values(make) -> None:
    value = make()
    laws = ContextLaws("p", value, (B, C), 1e-2)
    assert laws.native_all() is None
    contexts = np.array([2, 0], dtype=np.int64)
    rows, index = laws.native_rows(1, contexts)
    assert rows.dtype in (np.float32, np.float64)
    assert np.array_equal(index, np.arange(2))
    np.testing.assert_array_equal(rows[index].astype(np.float64), _numpy(value)[1, contexts])


@pytest.mark.parametrize("make", VIEWABLE + COPIED)
def test_entries_rows_and_sums_are_the_given_values(make) -> None:
    """Every context's law sums to its own total (within atol): each row is renormalised by
    its own, whichever row was read first."""
    value = make()
    if isinstance(value, torch.Tensor):
        value = value * torch.from_numpy(_values(spread=1e-3) / _values()).to(value.dtype)
    else:
        value = value * (_values(spread=1e-3) / _values()).astype(value.dtype)
    given = _numpy(value)
    laws = ContextLaws("q", value, (B, C), 1e-2)
    contexts, tokens = np.array([0, 2, 1]), np.array([4, 0, 3])
    picked = laws.values_at(1, contexts, tokens)
    assert picked.dtype == np.float64
    np.testing.assert_array_equal(picked, given[1, contexts, tokens])
    for b in range(B):
        raw = laws.raw(b, contexts)
        np.testing.assert_array_equal(raw, given[b, contexts])
        totals = given[b, contexts].sum(axis=1)
        np.testing.assert_allclose(laws.rows(b, contexts), raw / totals[:, None], rtol=1e-6)
        np.testing.assert_allclose(laws.row(b, 2), given[b, 2] / totals[1], rtol=1e-6)
        assert laws.total(b, 1) == pytest.approx(totals[2], rel=1e-6)


def test_tolerance_is_the_inputs_unless_given() -> None:
    """float64 input: 1e-6; float32: 1e-4 (the precision's sum tolerance); atol overrides."""
    values = _values()
    values[0, 1] *= 1 + 1e-5
    with pytest.raises(ValueError, match=r"^p\[0, 1\]: does not sum to 1 within atol 1e-06"):
        ContextLaws("p", values, (B, C), None).total(0, 1)
    assert ContextLaws("p", values.astype(np.float32), (B, C), None).total(0, 1) == pytest.approx(
        1 + 1e-5
    )
    assert ContextLaws("p", values, (B, C), 1e-4).total(0, 1) == pytest.approx(1 + 1e-5)
    with pytest.raises(ValueError, match=r"^atol: must be at least 0"):
        ContextLaws("p", values, (B, C), -1.0)
    edge = np.array([[[0.75, 0.5], [0.5, 0.5]]])  # sums 1.25 and 1, exact in binary
    assert ContextLaws("p", edge, (1, 2), 0.25).total(0, 0) == 1.25  # within atol: inclusive


def test_a_bad_row_is_refused_naming_it_when_read() -> None:
    values = _values()
    values[1, 2, 0] = np.nan
    laws = ContextLaws("p", values, (B, C), None)
    assert laws.total(0, 2) == pytest.approx(1.0)
    for read in (lambda: laws.total(1, 2), lambda: laws.row(1, 2), lambda: laws.refuse(1, 2)):
        with pytest.raises(ValueError, match=r"^p\[1, 2\]: has a negative, NaN or infinite entry$"):
            read()
    with pytest.raises(ValueError, match=r"^p\[1, 2\]: has a negative"):
        laws.rows(1, np.array([0, 2]))


@pytest.mark.parametrize(
    ("shape", "last_optional", "match"),
    [
        (
            (B, C - 1, V),
            False,
            r"^q: expected shape \(B, N \+ 1, V\) = \(2, 3, V\), got \(2, 2, 5\)$",
        ),
        (
            (B, C - 2, V),
            True,
            r"^q: expected shape .* = \(2, 3, V\) or \(2, 2, V\), got \(2, 1, 5\)$",
        ),
        ((B, C, 0), False, r"^q: empty vocabulary, shape \(2, 3, 0\)$"),
        ((B, C), False, r"^q: expected shape"),
    ],
)
def test_shapes_are_refused_naming_the_argument(shape, last_optional, match) -> None:
    with pytest.raises(ValueError, match=match):
        ContextLaws("q", np.full(shape, 0.2), (B, C), None, last_optional=last_optional)


def test_lists_are_read_and_other_dtypes_refused_naming_the_argument() -> None:
    laws = ContextLaws("p", _values().tolist(), (B, C), None)
    assert laws.kind.library == "numpy" and laws.total(1, 2) == pytest.approx(1.0)
    with pytest.raises(ValueError, match=r"^q: expected a float16, bfloat16, float32 or float64"):
        ContextLaws("q", np.ones((B, C, V), dtype=np.int64), (B, C), None)
    with pytest.raises(ValueError, match=r"^q: expected real numbers"):
        ContextLaws("q", [[["a"] * V] * C] * B, (B, C), None)


def test_the_last_row_is_required_unless_optional() -> None:
    with pytest.raises(ValueError, match=r"^q: expected shape \(B, N \+ 1, V\) = \(2, 3, V\), got"):
        ContextLaws("q", _values()[:, :2], (B, C), None)


def test_a_chain_may_omit_the_last_draft_row() -> None:
    laws = ContextLaws("q", _values()[:, :2], (B, C), None, last_optional=True)
    assert laws.vocab == V and laws.total(1, 1) == pytest.approx(1.0)
