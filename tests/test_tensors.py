"""Decoder inputs as models produce them (otlp.tensors) and verify_drafts on them (issue 17)."""

from __future__ import annotations

import numpy as np
import pytest

import otlp
from otlp.decoding import verify_tree
from otlp.tensors import (
    ArrayKind,
    as_float64,
    as_index_array,
    check_distributions,
    sum_tolerance,
)

METHODS = ("global_resolution", "rrs", "kseq", "maxflow_cs")


def _reproducer() -> tuple[np.ndarray, np.ndarray]:
    """Issue 17: p, q Dirichlet(1, ..., 1) over 6 tokens (seed 0), q[4] = 1e-60 renormalised."""
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(6))
    q = rng.dirichlet(np.ones(6))
    q[4] = 1e-60
    return p, q / q.sum()


@pytest.mark.parametrize("method", METHODS)
def test_float32_p_with_a_float64_q_verifies_a_tiny_draft(method: str) -> None:
    p, q = _reproducer()
    drafts = np.array([[4, 0]])
    got = otlp.verify_drafts(p.astype(np.float32), q, drafts, method=method, rng=3)
    # The same call with p widened by hand: q is used exactly as given, never rounded.
    widened = p.astype(np.float32).astype(np.float64)
    same = otlp.verify_drafts(widened, q, drafts, method=method, rng=3)
    assert got.tokens.tolist() == same.tokens.tolist()
    assert got.tokens.dtype == np.int64
    # q in float32 really cannot have drafted token 4: that is refused, naming drafts.
    with pytest.raises(ValueError, match=r"drafts\[0"):
        otlp.verify_drafts(p, q.astype(np.float32), drafts, method=method, rng=3)


@pytest.mark.parametrize("method", METHODS)
def test_every_method_sees_the_unrounded_q(method: str) -> None:
    """A float32 p must not pull q to float32: the token law uses q's float64 values."""
    p, q = _reproducer()
    p32 = p.astype(np.float32)
    drafts = np.array([[4, 4]])
    draws = otlp.verify_drafts(
        p32, np.tile(q, (400, 1)), np.tile(drafts, (400, 1)), method=method, rng=0
    )
    assert np.all(p32[draws.tokens] > 0)


def test_each_array_is_judged_at_its_own_precision() -> None:
    p, q = _reproducer()
    drafts = np.array([[0, 1]])
    p_off = p * (1 + 5e-5)  # within float32's 1e-4, outside float64's 1e-6
    otlp.verify_drafts(p_off.astype(np.float32), q, drafts, rng=0)
    with pytest.raises(ValueError, match=r"q\[0\]: does not sum to 1"):
        otlp.verify_drafts(p.astype(np.float32), q * (1 + 5e-5), drafts, rng=0)
    with pytest.raises(ValueError, match=r"p\[0\]: does not sum to 1"):
        otlp.verify_drafts(p_off, q, drafts, rng=0)
    for method in ("rrs", "maxflow_cs"):
        with pytest.raises(ValueError, match=r"q\[0\]: does not sum to 1"):
            otlp.verify_drafts(p.astype(np.float32), q * (1 + 5e-5), drafts, method=method)
    # float16 p: rounding each entry moves the sum by up to eps/2; 2 eps is accepted.
    p16 = (p * (1 + 1.2e-3)).astype(np.float16)
    otlp.verify_drafts(p16, q, drafts, rng=0)
    # an explicit atol applies to both
    otlp.verify_drafts(p_off, q, drafts, rng=0, atol=1e-4)


@pytest.mark.parametrize("total", [0.9, 0.99, 1.01, 1.1])
@pytest.mark.parametrize("name", ["p", "q"])
def test_rows_summing_below_or_above_one_are_refused(name: str, total: float) -> None:
    """Off by 0.1 or 0.01 either way is refused, never silently renormalised (a check
    without the absolute value passed a p row summing to 0.9)."""
    p, q = _reproducer()
    drafts = np.array([[0, 1]])
    laws = {"p": p, "q": q}
    laws[name] = laws[name] * total
    with pytest.raises(ValueError, match=rf"{name}\[0\]: does not sum to 1 within atol"):
        otlp.verify_drafts(laws["p"], laws["q"], drafts, rng=0)
    parents = np.array([-1])  # one node: contexts 0 (the root) and 1
    tree = {key: np.broadcast_to(law, (1, 2, law.shape[-1])) for key, law in laws.items()}
    with pytest.raises(ValueError, match=rf"{name}\[0, 0\]: does not sum to 1 within atol"):
        verify_tree(np.array([[0]]), parents, tree["p"], tree["q"], method="sps", rng=0)


def test_sum_tolerances_follow_the_precision() -> None:
    assert sum_tolerance(float(np.finfo(np.float64).eps)) == 1e-6
    assert sum_tolerance(float(np.finfo(np.float32).eps)) == 1e-4
    assert sum_tolerance(float(np.finfo(np.float16).eps)) == 2.0**-9
    assert sum_tolerance(2.0**-7) == 2.0**-6  # bfloat16
    assert as_float64("p", [0.5, 0.5])[1].sum_tolerance == 1e-6


def test_bfloat16_from_ml_dtypes() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    p, q = _reproducer()
    p_bf = p.astype(ml_dtypes.bfloat16)
    arr, kind = as_float64("p", p_bf)
    assert arr.dtype == np.float64 and kind.dtype == "bfloat16" and kind.eps == 2.0**-7
    np.testing.assert_array_equal(arr, p_bf.astype(np.float64))
    result = otlp.verify_drafts(p_bf, q, np.array([[4, 0]]), method="rrs", rng=1)
    assert result.tokens.shape == (1,)


def test_torch_tensors_of_any_dtype() -> None:
    torch = pytest.importorskip("torch")
    p, q = _reproducer()
    drafts = np.array([[4, 0], [1, 2]])
    ref = otlp.verify_drafts(p, q, drafts, rng=7)
    tp = torch.tensor(p, requires_grad=True)
    got = otlp.verify_drafts(tp, torch.tensor(q), torch.tensor(drafts), rng=7)
    assert got.tokens.tolist() == ref.tokens.tolist()
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        arr, kind = as_float64("p", torch.tensor(p).to(dtype))
        assert kind.library == "torch" and kind.device == "cpu"
        assert kind.eps == torch.finfo(dtype).eps and arr.dtype == np.float64
        otlp.verify_drafts(torch.tensor(p).to(dtype), torch.tensor(q), drafts, method="kseq")
    with pytest.raises(ValueError, match="p: expected a floating-point tensor"):
        as_float64("p", torch.tensor([1, 0]))
    with pytest.raises(ValueError, match="drafts: expected integer token ids"):
        otlp.verify_drafts(p, q, torch.tensor([[1.0, 2.0]]))
    ids, kind = as_index_array("drafts", torch.tensor([[3, 1]], dtype=torch.int32))
    assert ids.dtype == np.int64 and kind.library == "torch"
    back = kind.wrap(ids)
    assert isinstance(back, torch.Tensor) and back.dtype == torch.int64


@pytest.mark.parametrize(
    ("drafts", "match"),
    [
        ([[1, 2], [3]], "drafts: not a rectangular array"),
        ([[1.0, 2.0]], "drafts: expected integer token ids, got dtype float64"),
        ([[True, False]], "drafts: expected integer token ids, got dtype bool"),
        ([1, 2], r"drafts: expected shape \(B, n\)"),
        (np.zeros((1, 2, 2), dtype=np.int64), r"drafts: expected shape \(B, n\)"),
        (None, "drafts: expected an array, got None"),
        ("01", "drafts: expected an array"),
        ([[1, -1]], r"drafts\[0, 1\]: token id -1 outside"),
    ],
)
def test_bad_drafts_name_drafts(drafts: object, match: str) -> None:
    p, q = _reproducer()
    for method in ("global_resolution", "rrs"):
        with pytest.raises(ValueError, match=match):
            otlp.verify_drafts(p, q, drafts, method=method)


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (None, "p: expected an array, got None"),
        ([0.5, 0.5j], "p: expected real numbers"),
        (np.array([0.5, 0.5j]), "p: expected a float16, bfloat16, float32 or float64"),
        ([[0.5, 0.5], [1.0]], "p: not a rectangular array"),
        (np.array([True, False]), "p: expected a float16"),
        ("0.5", "p: expected an array"),
    ],
)
def test_bad_distributions_name_themselves(value: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        as_float64("p", value)


def test_check_distributions_names_the_row() -> None:
    rows = np.array([[0.5, 0.5], [0.5, 0.6], [np.nan, 1.0]])
    with pytest.raises(ValueError, match=r"q\[1\]: does not sum to 1 within atol 1e-06"):
        check_distributions("q", rows[:2], 1e-6)
    with pytest.raises(ValueError, match=r"q\[2\]: has a negative, NaN"):
        check_distributions("q", rows, 1.0)
    with pytest.raises(ValueError, match=r"p\[0, 1\]: has a negative"):
        check_distributions("p", np.array([[[1.0, 0.0], [1.5, -0.5]]]), 1e-6)
    check_distributions("p", np.array([0.25, 0.75]), 0.0)


def test_numpy_kind_wraps_to_itself() -> None:
    _, kind = as_float64("p", np.array([0.25, 0.75], dtype=np.float32))
    assert kind == ArrayKind("numpy", "float32", None, float(np.finfo(np.float32).eps))
    out = np.array([1, 2])
    assert kind.wrap(out) is out


SCHEME_METHODS = [
    ("iid", "global_resolution", 2),
    ("iid", "sps", 1),
    ("iid", "rrs", 3),
    ("iid", "kseq", 2),
    ("iid", "maxflow_cs", 2),
    ("iid", "spechub", 2),
    ("without_replacement", "global_resolution", 3),
    ("without_replacement", "rrs_without_replacement", 2),
    ("without_replacement", "maxflow_cs", 2),
    ("independent", "global_resolution", 2),
    ("independent", "maxflow_cs", 2),
    ("greedy", "global_resolution", 3),
    ("greedy", "maxflow_cs", 2),
]


@pytest.mark.parametrize("dtype_name", ["bfloat16", "float16"])
@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize(("scheme", "method", "n"), SCHEME_METHODS)
def test_half_precision_tensors_for_every_scheme_and_input(
    scheme: str, method: str, n: int, batched: bool, dtype_name: str
) -> None:
    """Issue 27: torch bfloat16/float16 p and q (q of shape (2, V) or (B, 2, V) for
    independent drafts) and torch int64 drafts go through the one reading path of
    verify_drafts: the tokens equal those of the call on the same values widened to float64
    numpy (same seed, same tolerance)."""
    torch = pytest.importorskip("torch")
    dtype = getattr(torch, dtype_name)
    rng = np.random.default_rng(3)
    rows, vocab = 4, 7
    draft_count = 2 if scheme == "independent" else 1
    batch = rows if batched else 1
    p_t = torch.tensor(rng.dirichlet(np.ones(vocab), batch)).to(dtype)
    q_t = torch.tensor(rng.dirichlet(np.ones(vocab), (batch, draft_count))).to(dtype)
    p_w = p_t.to(torch.float64).numpy()
    q_w = q_t.to(torch.float64).numpy()
    tol = otlp.tensors.sum_tolerance(float(torch.finfo(dtype).eps))
    drafts = np.empty((rows, n), dtype=np.int64)
    for b in range(rows):
        r = b if batched else 0
        q_arg = list(q_w[r]) if scheme == "independent" else q_w[r, 0]
        inst = otlp.Instance(p_w[r], q_arg, n, scheme, atol=tol)
        drafts[b] = inst.sample_drafts(b, 1)[0]
        if method == "spechub":  # its pair always holds the hub, argmax q
            hub = int(inst.tokens[np.argmax(inst.q_local)])
            drafts[b] = [hub, drafts[b, 1] if drafts[b, 1] != hub else drafts[b, 0]]
    if scheme != "independent":
        q_t, q_w = q_t[:, 0], q_w[:, 0]
    if not batched:
        p_t, q_t, p_w, q_w = p_t[0], q_t[0], p_w[0], q_w[0]
    options = {"scheme": scheme, "method": method, "rng": 11, "time_budget": None}  # no clock
    got = otlp.verify_drafts(p_t, q_t, torch.tensor(drafts), **options)
    ref = otlp.verify_drafts(p_w, q_w, drafts, atol=tol, **options)
    assert got.tokens.tolist() == ref.tokens.tolist()


def test_kinds_say_where_the_input_came_from() -> None:
    """ArrayKind records library, dtype name, device and precision (ids: eps 0)."""
    import torch

    assert as_index_array("drafts", np.array([[1, 2]], dtype=np.int32))[1] == ArrayKind(
        "numpy", "int32", None, 0.0
    )
    assert as_index_array("drafts", torch.tensor([[1, 2]]))[1] == ArrayKind(
        "torch", "int64", "cpu", 0.0
    )
    assert as_float64("p", torch.tensor([0.5, 0.5], dtype=torch.bfloat16))[1] == ArrayKind(
        "torch", "bfloat16", "cpu", float(torch.finfo(torch.bfloat16).eps)
    )


def test_an_empty_list_of_ids_is_an_empty_int64_array() -> None:
    ids, kind = as_index_array("omega", [])
    assert ids.dtype == np.int64 and ids.shape == (0,) and kind.dtype == "int64"
    with pytest.raises(ValueError, match=r"^omega: expected integer token ids, got dtype float64"):
        as_index_array("omega", [2.0])
    with pytest.raises(ValueError, match=r"^omega: expected integer token ids, got dtype float64"):
        as_index_array("omega", np.zeros(0))  # an empty float array is still floats


def test_long_values_are_shortened_in_messages() -> None:
    """The offending value is shown up to 60 characters, longer ones cut to 57 and '...'."""
    exact = "x" * 60
    with pytest.raises(ValueError, match=rf"^p: expected an array, got '{'x' * 58}'$"):
        as_float64("p", exact[:58])
    with pytest.raises(ValueError, match=rf"^p: expected an array, got '{'x' * 56}\.\.\.$"):
        as_float64("p", exact + "x")


def test_check_distributions_labels_and_figures() -> None:
    """A single vector is named as itself, with its sum; a one-entry law is a law; sums that
    overflow are a refusal, not a warning."""
    import warnings

    check_distributions("p", np.array([1.0]), 1e-6)
    with pytest.raises(ValueError, match=r"^p: does not sum to 1 within atol 1e-06 \(sum 0\.75\)$"):
        check_distributions("p", np.array([0.5, 0.25]), 1e-6)
    with pytest.raises(ValueError, match=r"^p\[1\]: does not sum to 1"):
        check_distributions("p", np.array([[1.0], [0.5]]), 1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(
            ValueError, match=r"^p: does not sum to 1 within atol 1e-06 \(sum inf\)$"
        ):
            check_distributions("p", np.array([1e308, 1e308]), 1e-6)


def test_index_arrays_are_int64_within_their_range() -> None:
    """Ids come back int64 whatever integer dtype came in; every bound is exact: size is
    excluded, uint64 up to the int64 maximum is read, beyond it refused."""
    ids, _ = as_index_array("drafts", np.array([[1, 2]], dtype=np.int32))
    assert ids.dtype == np.int64
    with pytest.raises(ValueError, match=r"^drafts: expected a 2-D array, got shape \(2,\)$"):
        as_index_array("drafts", [1, 2], ndims=(2,))
    assert as_index_array("omega", [2], size=3)[0].tolist() == [2]
    with pytest.raises(ValueError, match=r"^omega\[1\]: token id 3 outside \[0, 3\)$"):
        as_index_array("omega", [0, 3], size=3)
    with pytest.raises(ValueError, match=r"^omega: token id 5 outside \[0, 3\)$"):
        as_index_array("omega", np.int64(5), size=3)
    assert as_index_array("x", np.array([7], dtype=np.uint64))[0].tolist() == [7]
    top = np.iinfo(np.int64).max
    assert as_index_array("x", np.array([top], dtype=np.uint64))[0].tolist() == [top]
    with pytest.raises(ValueError, match=r"^x: token ids beyond int64$"):
        as_index_array("x", np.array([top + 1], dtype=np.uint64))


def test_messages_of_empty_and_invalid_sums() -> None:
    import warnings

    with pytest.raises(ValueError, match=r"^q: empty array, shape \(0,\)$"):
        check_distributions("q", np.zeros(0), 1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=r"^q: has a negative, NaN or infinite entry$"):
            check_distributions("q", np.array([np.inf, -np.inf]), 1e-6)
    with pytest.raises(ValueError, match=rf"^p: expected an array, got '{'x' * 56}\.\.\.$"):
        as_float64("p", "x" * 59)  # its repr is 61 characters: cut


def test_float_messages_show_the_value_and_the_shape() -> None:
    with pytest.raises(ValueError, match=r"^p: expected real numbers, got \[\['a', 'b'\]\]$"):
        as_float64("p", [["a", "b"]])
    with pytest.raises(ValueError, match=r"^p: expected a 2-D array, got shape \(1,\)$"):
        as_float64("p", [1.0], ndims=(2,))
    with pytest.raises(ValueError, match=r"^p: not a rectangular array of numbers \(ragged"):
        as_float64("p", [1.0, None])


def test_a_torch_object_that_is_not_a_tensor_is_read_as_a_sequence():
    """A tensor is a torch object with ``detach``: ``torch.Size`` (a tuple from torch's
    module) is read as plain ids, numpy in and numpy out."""
    torch = pytest.importorskip("torch")
    ids, kind = as_index_array("ids", torch.Size([2, 0]), ndims=(1,))
    assert ids.tolist() == [2, 0] and ids.dtype == np.int64
    assert kind.library == "numpy"


@pytest.mark.parametrize(
    ("ndims", "text"),
    [
        ((0,), "a scalar"),
        ((1,), "a vector"),
        ((2,), "a 2-D array"),
        ((3,), "a 3-D array"),
        ((4,), "a 4-D array"),
        ((1, 2), "a vector or a 2-D array"),
        ((0, 3, 5), "a scalar or a 3-D array or a 5-D array"),
    ],
)
def test_wrong_dimensions_are_named_in_words(ndims, text):
    """Both readers say which numbers of dimensions they expected, in words, and the shape
    they got."""
    values = np.full((1, 1, 1, 1, 1, 1), 0.5)
    with pytest.raises(ValueError, match=rf"^x: expected {text}, got shape \(1, 1, 1, 1, 1, 1\)$"):
        as_float64("x", values, ndims=ndims)
    with pytest.raises(
        ValueError, match=rf"^ids: expected {text}, got shape \(1, 1, 1, 1, 1, 1\)$"
    ):
        as_index_array("ids", values.astype(np.int64), ndims=ndims)
