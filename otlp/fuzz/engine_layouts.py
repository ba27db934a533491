"""Fuzz cases and checks for :func:`otlp.decoding.verify_chain` in the engines' layouts.

An ``"engine"`` case is a small batch of chains handed over as an inference engine hands it:
target logits (float16, ml_dtypes bfloat16, float32, float64, or torch tensors) with a
temperature per row down to 0 (greedy) and the greedy limit (1e-39, 5e-324: subnormal),
``target_top_k`` / ``target_top_p`` per row, draft probabilities of L or L + 1 rows, absent
draft tails (-1), and ``rng`` as one seed, a seed or ``numpy.random.Generator`` per row, a
``torch.Generator`` per row or a dict of seeded requests. The check
(:func:`check_engine`) runs with numpy's floating-point warnings (divide, overflow, invalid)
and every ``RuntimeWarning`` turned into errors, and asks for:

* well-formed outputs: ``output_ids`` (B, L + 1) whose first ``num_accepted + 1`` entries
  are the accepted drafts then the bonus token, -1 after, ids in [0, V), ``num_accepted`` at
  most the row's present drafts;
* the law the target was sampled from equal to the one computed here by hand from the
  logits (softmax in float64 of the dtype's values, the greedy limit as the uniform law on
  the tied maxima, top-k then top-p by a full sort), to the dtype's rounding;
* the same outcome as the call on those laws (``target_laws``) from the same seeds, the same
  outcome twice from the same seeds, and a row's outcome alone equal to its outcome in the
  batch when it has its own generator;
* the emitted first token's law: exact (one token of probability 1) for greedy rows, else
  the row repeated :data:`REPEATS` times is checked against :func:`otlp.decoding.outcome_law`
  (every emitted tuple of positive exact probability, token counts within a
  :data:`Z_LIMIT`-sigma band of the exact marginal) for the exact methods.
"""

from __future__ import annotations

import itertools
import warnings
from importlib.util import find_spec
from typing import Any

import numpy as np

from otlp.decoding import outcome_law, verify_chain
from otlp.verification.engine_layouts import PLACEHOLDER_TOKEN_ID, target_laws
from otlp.verification.shapes import chain

# Methods that verify a chain of i.i.d. drafts; the exact ones have an exact outcome_law.
ENGINE_METHODS = (
    "sps",
    "rrs",
    "kseq",
    "block",
    "traversal_verification",
    "maxflow_cs",
    "global_resolution",
)
EXACT_METHODS = ("sps", "rrs", "kseq", "block", "traversal_verification", "maxflow_cs")
# Exact methods cheap enough to run REPEATS copies of a row (maxflow_cs solves an OT per node)
REPEATED_METHODS = ("sps", "rrs", "kseq", "block", "traversal_verification")
LOGIT_DTYPES = (
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "torch.float32",
    "torch.bfloat16",
    "torch.float16",
)
TEMPERATURES = (0.0, 5e-324, 1e-39, 1e-6, 0.05, 0.5, 1.0, 1.0, 2.0)
TINY_TEMPERATURE = 1e-30  # at or below: the greedy limit for any logits a dtype can hold
RNG_KINDS = ("seed", "seeds", "generators", "dict", "torch")
REPEATS = 384  # copies of one row for the law of its first emitted token
Z_LIMIT = 6.5  # sigma band per token (false alarm below 1e-9 per token)
# How far the law a dtype's output holds may sit from the float64 law (absolute, per entry)
LAW_TOL = {"float16": 1e-3, "bfloat16": 8e-3, "float32": 1e-6, "float64": 1e-12}


def _dtype_name(dtype: str) -> str:
    return dtype.removeprefix("torch.")


def engine_case(rng: np.random.Generator, index: int) -> dict[str, Any]:
    """One engine-layout case: B <= 3 chains of L <= 3 drafts over V <= 8 tokens, logits of
    a random dtype and scale (ties half the time at the greedy temperatures), a temperature,
    top-k and top-p per row, a draft-row layout and an ``rng`` kind."""
    rows, length = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    vocab = int(rng.integers(2, 9))
    scale = float(rng.choice([0.5, 2.0, 8.0, 30.0]))
    logits = rng.normal(0.0, scale, size=(rows, length + 1, vocab))
    if rng.random() < 0.3:  # integer logits: ties at the maximum
        logits = np.round(logits / scale * 2)
    temperature = [float(rng.choice(TEMPERATURES)) for _ in range(rows)]
    top_k = [int(rng.integers(0, vocab + 2)) for _ in range(rows)] if rng.random() < 0.5 else None
    top_p = (
        [float(rng.choice([1.0, 0.95, 0.8, 0.5, 1e-9])) for _ in range(rows)]
        if rng.random() < 0.5
        else None
    )
    q = rng.dirichlet(np.full(vocab, float(rng.choice([0.3, 1.0]))), size=(rows, length + 1))
    tokens = np.array([[rng.choice(vocab, p=q[b, i]) for i in range(length)] for b in range(rows)])
    for b in range(rows):
        if rng.random() < 0.2:  # an absent tail (a row with fewer drafts)
            tokens[b, int(rng.integers(0, length)) :] = PLACEHOLDER_TOKEN_ID
    return {
        "kind": "engine",
        "index": index,
        "class": "engine",
        "method": str(rng.choice(ENGINE_METHODS)),
        "logits": logits.tolist(),
        "dtype": str(rng.choice(LOGIT_DTYPES)),
        "q": q.tolist(),
        "draft_rows": "L" if rng.random() < 0.5 else "L+1",
        "q_dtype": str(rng.choice(["float32", "float64"])),
        "tokens": tokens.tolist(),
        "temperature": temperature,
        "top_k": top_k,
        "top_p": top_p,
        "rng": str(rng.choice(RNG_KINDS)),
        "seed": int(rng.integers(2**31)),
    }


def _logits(case: dict[str, Any]) -> Any:
    """The case's logits in its dtype (numpy, ml_dtypes bfloat16 or torch)."""
    values = np.asarray(case["logits"], dtype=np.float64)
    dtype = case["dtype"]
    if dtype.startswith("torch."):
        import torch

        return torch.tensor(values).to(getattr(torch, _dtype_name(dtype)))
    if dtype == "bfloat16":
        import ml_dtypes

        return values.astype(ml_dtypes.bfloat16)
    return values.astype(dtype)


def _as_numpy(values: Any) -> np.ndarray:
    """numpy (float64 for floating input) of a numpy array, a list or a torch tensor."""
    if hasattr(values, "detach"):
        import torch

        values = values.detach().cpu()
        if values.is_floating_point():
            values = values.to(torch.float64)
        values = values.numpy()
    arr = np.asarray(values)
    return arr.astype(np.float64) if arr.dtype.kind == "f" or arr.dtype.kind == "V" else arr


def _float64_logits(logits: Any) -> np.ndarray:
    """The values the dtype holds, exactly, as float64."""
    if hasattr(logits, "detach"):
        return _as_numpy(logits)
    return np.asarray(logits).astype(np.float64)


def law_by_hand(logits: np.ndarray, temperature: float, top_k: int, top_p: float) -> np.ndarray:
    """The target law of one context (V,) as the engines define it, computed independently of
    the library: temperature 0 one-hot on the lowest argmax; a temperature at or below
    :data:`TINY_TEMPERATURE` the greedy limit (uniform on the tied maxima); else softmax in
    float64; then the top-k entries (ties at the k-th value kept), renormalised; then the
    smallest head (decreasing, ties by id) whose mass reaches top-p, renormalised."""
    vocab = logits.shape[0]
    if temperature == 0:
        law = np.zeros(vocab)
        law[int(np.argmax(logits))] = 1.0
        return law
    if temperature <= TINY_TEMPERATURE:
        law = (logits == logits.max()).astype(np.float64)
    else:
        law = np.exp((logits - logits.max()) / temperature)
    law = law / law.sum()
    if 0 < top_k < vocab:
        kth = np.sort(law)[::-1][top_k - 1]
        law = np.where(law >= kth, law, 0.0)
        law = law / law.sum()
    if top_p < 1:
        order = np.argsort(-law, kind="stable")
        keep = (np.cumsum(law[order]) - law[order]) < top_p
        law[order[~keep]] = 0.0
        law = law / law.sum()
    return law


def _rng_arg(case: dict[str, Any], rows: int, offset: int = 0) -> Any:
    """A fresh ``rng`` argument of the case's kind (the same seeds every time)."""
    base = case["seed"] + offset
    kind = case["rng"]
    if kind == "seed":
        return base
    if kind == "seeds":
        return [base + b for b in range(rows)]
    if kind == "generators":
        return [np.random.default_rng(base + b) for b in range(rows)]
    if kind == "dict":
        return {b: np.random.default_rng(base + b) for b in range(rows)}
    import torch

    return [torch.Generator().manual_seed(base + b) for b in range(rows)]


def _row_rng(case: dict[str, Any], b: int) -> Any:
    """Row ``b``'s own generator as a one-row ``rng`` (per-row kinds only)."""
    base = case["seed"] + b
    kind = case["rng"]
    if kind == "seeds":
        return [base]
    if kind in ("generators", "dict"):
        return [np.random.default_rng(base)]
    import torch

    return [torch.Generator().manual_seed(base)]


def _form_problems(result: Any, tokens: np.ndarray, vocab: int) -> list[str]:
    """Shapes, id ranges, padding and counts of a chain verification's outputs."""
    rows, length = tokens.shape
    out = _as_numpy(result.output_ids).astype(np.int64)
    accepted = _as_numpy(result.num_accepted).astype(np.int64)
    bonus = _as_numpy(result.bonus_token).astype(np.int64)
    if out.shape != (rows, length + 1) or accepted.shape != (rows,) or bonus.shape != (rows,):
        return [f"shapes: output_ids {out.shape}, num_accepted {accepted.shape}"]
    for b in range(rows):
        present = int(np.argmax(tokens[b] < 0)) if (tokens[b] < 0).any() else length
        count = int(accepted[b])
        if not 0 <= count <= present:
            return [f"row {b}: num_accepted {count} with {present} drafts"]
        emitted = out[b, : count + 1]
        if np.any(emitted < 0) or np.any(emitted >= vocab):
            return [f"row {b}: emitted ids {emitted.tolist()} outside [0, {vocab})"]
        if not np.array_equal(emitted[:count], tokens[b, :count]) or emitted[count] != bonus[b]:
            return [f"row {b}: output_ids {out[b].tolist()} are not the accepted drafts + bonus"]
        if np.any(out[b, count + 1 :] != PLACEHOLDER_TOKEN_ID):
            return [f"row {b}: output_ids {out[b].tolist()} not padded with -1"]
        if not np.array_equal(_as_numpy(result.tokens_out(b)).astype(np.int64), emitted):
            return [f"row {b}: tokens_out differs from output_ids"]
    return []


def _repeated(values: Any, b: int, count: int) -> Any:
    """Row ``b`` of a numpy array or torch tensor, ``count`` times."""
    if hasattr(values, "detach"):
        return values[b : b + 1].repeat(count, *([1] * (values.dim() - 1)))
    return np.repeat(values[b : b + 1], count, axis=0)


def _exact_law(
    case: dict[str, Any], b: int, tokens: np.ndarray, law: np.ndarray, q: Any
) -> dict[tuple[int, ...], float]:
    """``outcome_law`` of row ``b`` on the law the call samples from (q padded with a
    never-read row at the bonus position in the engine layout)."""
    length = tokens.shape[1]
    q_row = _as_numpy(q[b])
    if q_row.shape[0] == length:
        q_row = np.vstack([q_row, np.full(q_row.shape[1], 1.0 / q_row.shape[1])])
    p_row = law[b] / law[b].sum(axis=-1, keepdims=True)  # a 16-bit law's sum is off by ulps
    return outcome_law(tokens[b], chain(length), p_row, q_row, method=case["method"])


def _emitted(result: Any) -> list[tuple[int, ...]]:
    """Every row's emitted tokens as a tuple."""
    out = _as_numpy(result.output_ids).astype(np.int64)
    counts = _as_numpy(result.num_accepted).astype(np.int64)
    return [tuple(int(t) for t in row[: count + 1]) for row, count in zip(out, counts, strict=True)]


def _support_problems(
    case: dict[str, Any], tokens: np.ndarray, law: np.ndarray, q: Any, result: Any
) -> list[str]:
    """Every row's emitted tokens have positive exact probability."""
    for b, emitted in enumerate(_emitted(result)):
        if _exact_law(case, b, tokens, law, q).get(emitted, 0.0) <= 0:
            return [f"row {b}: emitted {list(emitted)}, of exact probability 0"]
    return []


def _first_token_problems(
    case: dict[str, Any], b: int, tokens: np.ndarray, law: np.ndarray, q: Any, arguments: dict
) -> list[str]:
    """Row ``b`` repeated :data:`REPEATS` times with one seed: every emitted tuple must have
    positive exact probability under ``outcome_law`` on the law the call samples from, and
    the first token's counts must lie within the sigma band of its exact marginal."""
    exact = _exact_law(case, b, tokens, law, q)
    marginal = np.zeros(law.shape[-1])
    for emitted, mass in exact.items():
        marginal[emitted[0]] += mass
    options = dict(arguments)
    for name in ("temperature", "target_top_k", "target_top_p"):
        if options.get(name) is not None:
            options[name] = [options[name][b]] * REPEATS
    tokens_in = _repeated(tokens, b, REPEATS)
    if hasattr(q, "detach"):
        import torch

        tokens_in = torch.from_numpy(tokens_in)
    result = verify_chain(
        tokens_in,
        _repeated(_logits(case), b, REPEATS),
        _repeated(q, b, REPEATS),
        rng=case["seed"],
        **options,
    )
    emitted_rows = _emitted(result)
    for emitted in emitted_rows:
        if exact.get(emitted, 0.0) <= 0:
            return [f"row {b} repeated: emitted {list(emitted)}, of exact probability 0"]
    observed = np.bincount([e[0] for e in emitted_rows], minlength=law.shape[-1])
    expected = REPEATS * marginal
    marginal = np.clip(marginal, 0.0, 1.0)  # a sum of exact masses may pass 1 by an ulp
    spread = np.sqrt(REPEATS * marginal * (1 - marginal))
    if np.any(np.abs(observed - expected) > Z_LIMIT * spread + 3):
        return [
            f"row {b}: first token counts {observed.tolist()} against the exact law "
            f"{np.round(marginal, 4).tolist()} x {REPEATS}"
        ]
    return []


def check_engine(case: dict[str, Any]) -> list[str]:
    """The checks of the module notes on one engine case; numpy's floating-point warnings
    and ``RuntimeWarning`` are errors while it runs."""
    with warnings.catch_warnings(), np.errstate(divide="raise", over="raise", invalid="raise"):
        warnings.simplefilter("error", RuntimeWarning)
        return _engine_problems(case)


def _engine_problems(case: dict[str, Any]) -> list[str]:
    tokens = np.asarray(case["tokens"], dtype=np.int64)
    rows, length = tokens.shape
    logits = _logits(case)
    vocab = int(logits.shape[-1])
    q64 = np.asarray(case["q"], dtype=np.float64)
    q64 = q64 / q64.sum(axis=-1, keepdims=True)
    q_np = (q64[:, :length] if case["draft_rows"] == "L" else q64).astype(case["q_dtype"])
    q: Any = q_np
    if case["dtype"].startswith("torch."):
        import torch

        q = torch.from_numpy(q_np)
        logits_in: Any = logits
        tokens_in: Any = torch.from_numpy(tokens)
    else:
        logits_in, tokens_in = logits, tokens
    arguments: dict[str, Any] = {
        "method": case["method"],
        "temperature": case["temperature"],
        "target_top_k": case["top_k"],
        "target_top_p": case["top_p"],
    }
    result = verify_chain(tokens_in, logits_in, q, rng=_rng_arg(case, rows), **arguments)
    problems = _form_problems(result, tokens, vocab)
    if problems:
        return problems
    values = _float64_logits(logits)
    top_k = case["top_k"] or [0] * rows
    top_p = case["top_p"] or [1.0] * rows
    hand = np.array(
        [
            [
                law_by_hand(values[b, i], case["temperature"][b], top_k[b], top_p[b])
                for i in range(length + 1)
            ]
            for b in range(rows)
        ]
    )
    given = target_laws(logits, case["temperature"], case["top_k"], case["top_p"])
    law = _as_numpy(given)
    tol = LAW_TOL[_dtype_name(case["dtype"])]
    if not np.all(np.isfinite(law)):
        return ["target_laws: non-finite entries"]
    gap = float(np.abs(law - hand).max())
    if gap > tol:
        return [f"target law off the one computed by hand by {gap:.3g} (tolerance {tol:g})"]
    on_laws = verify_chain(tokens_in, given, q, rng=_rng_arg(case, rows), method=case["method"])
    if not np.array_equal(_as_numpy(on_laws.output_ids), _as_numpy(result.output_ids)):
        return ["logits and the laws they define gave different outcomes from the same seeds"]
    again = verify_chain(tokens_in, logits_in, q, rng=_rng_arg(case, rows), **arguments)
    same = _as_numpy(again.output_ids) == _as_numpy(result.output_ids)
    if not same.all():
        return ["not deterministic: the same seeds gave different output_ids"]
    if case["rng"] != "seed" and rows > 1:
        b = rows - 1
        alone_args: dict[str, Any] = {
            k: (v[b : b + 1] if isinstance(v, list) else v) for k, v in arguments.items()
        }
        alone = verify_chain(
            tokens_in[b : b + 1],
            logits_in[b : b + 1],
            q[b : b + 1],
            rng=_row_rng(case, b),
            **alone_args,
        )
        if not np.array_equal(_as_numpy(alone.output_ids)[0], _as_numpy(result.output_ids)[b]):
            return [f"row {b} alone with its own generator differs from its outcome in the batch"]
    for b in range(rows):  # greedy rows: the first emitted token is the argmax, exactly
        first = int(_as_numpy(result.output_ids)[b, 0])
        if hand[b, 0, first] <= 0:
            return [f"row {b}: first token {first} has target probability 0"]
    if case["method"] not in EXACT_METHODS:
        return []
    problems = _support_problems(case, tokens, law, q, result)
    if problems or case["method"] not in REPEATED_METHODS:
        return problems
    b = int(np.random.default_rng(case["seed"]).integers(rows))
    return _first_token_problems(case, b, tokens, law, q, arguments)


def warm_up_engine() -> None:
    """Compile (or load from numba's cache) every engine method's kernels for the rows an
    engine case hands them: float32 or float64 target rows beside float32 or float64 draft
    rows, the draft given with L rows (a view of fewer rows) or L + 1, numpy or torch, so
    that no timed check pays for compilation."""
    logits = np.array([[[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]])
    q = np.array([[[0.2, 0.3, 0.5], [0.5, 0.3, 0.2]]])
    pairs = [(t, d) for t in ("float32", "float64") for d in ("float32", "float64")]
    for method in ENGINE_METHODS:
        for (target, draft), rows in itertools.product(pairs, (1, 2)):
            verify_chain(
                np.array([[2]]),
                logits.astype(target),
                q[:, :rows].astype(draft),
                method=method,
                rng=[0],
                temperature=1.0,
                target_top_k=2,
                target_top_p=0.9,
            )
        if find_spec("torch"):
            import torch

            verify_chain(
                torch.tensor([[2]]),
                torch.tensor(logits, dtype=torch.bfloat16),
                torch.tensor(q[:, :1], dtype=torch.float32),
                method=method,
                rng=[torch.Generator().manual_seed(0)],
                temperature=1.0,
            )


def engine_components(case: dict[str, Any]) -> list[str]:
    """``engine:METHOD`` for an engine case."""
    return [f"engine:{case['method']}"]


def engine_component_names() -> list[str]:
    """Every component an engine case can produce."""
    return [f"engine:{m}" for m in ENGINE_METHODS]


__all__ = [
    "ENGINE_METHODS",
    "check_engine",
    "engine_case",
    "engine_component_names",
    "engine_components",
    "law_by_hand",
]
