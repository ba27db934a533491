"""Seeded random and adversarial fuzz cases.

A case is a plain JSON-friendly dict, generated deterministically from ``(seed, index)``, so a
failure can be saved and replayed exactly. Two kinds:

* ``"instance"``: ``p``, ``q`` (one row, or n rows for independent drafts), ``n``, ``scheme``,
  ``top_k``, ``dtype`` — for every method, rule and draft scheme;
* ``"multistep"``: a small model pair (``model_pair`` arguments), block length, paths,
  method and single-step rule — for the multi-step methods.

Instance classes (:data:`INSTANCE_CLASSES`) cover what broke solvers and rules before: one-hot
p or q, near one-hot q (1 - 1e-12), peaked q (1 - 1e-15 with the rest spread over 1e-18 ..
1e-16), subnormal and 1e-300 masses, column masses in the subnormal range, p = q, disjoint
supports, ties, float32 and float16 input, tiny vocabularies, top-k, every scheme, independent
drafts and the largest n the size limits allow on a tiny vocabulary; since issue 27 also p = 0
on the draft's top tokens (greedy with p = 0 on every draft), draft tokens of 1e-200 .. 1e-160
(tuple masses that underflow) and drafts on part of the vocabulary (independent drafters of
different supports). Every case also carries the ``tau`` global resolution runs at (down to
1e-6) and the ``decoder_dtypes`` its p and q are handed to :func:`otlp.verify_drafts` in
(float16, bfloat16, float32, float64, mixed; numpy, or torch bfloat16/float16).

The first :data:`REPRODUCERS` cases of every campaign (indices 0, 1, ...) are fixed instances
that once failed (issue 17); they run with whatever seed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from otlp.fuzz.classes import INSTANCE_CLASSES, dirichlet, normalised
from otlp.fuzz.decode_cli import decode_cli_case
from otlp.fuzz.engine_layouts import engine_case
from otlp.fuzz.referee_inputs import referee_case
from otlp.instance import SCHEMES

Case = dict[str, Any]
# every case kind make_case generates
KINDS = ("instance", "multistep", "budget", "engine", "referee", "decode_cli")
MULTISTEP_SHARE = 0.15  # fraction of cases that are multi-step model pairs
# Issue 39's surfaces, drawn after the multi-step share: engine layouts of verify_chain, the
# referee's inputs, the decode command line (otlp.fuzz.engine_layouts, referee_inputs, decode_cli)
SURFACE_SHARES = (("engine", 0.06), ("referee", 0.02), ("decode_cli", 0.02))
MAX_V = 9
MAX_N_TINY_V = 6  # n up to this on V <= 3 ("extreme n within limits", each solve < 1 s)
# Many drafts on V <= 4: solved (set masses by dynamic programming) or refused by otlp.limits
HUGE_N = (8, 12, 16, 30, 100, 200, 10**6)


SHAPES = ("small", "tiny_v", "extreme_n", "top_k", "huge_n")
TAUS = (1e-3, 1e-3, 1e-4, 1e-6)  # global resolution's threshold, down to 1e-6
# The dtypes p and q are handed to the decoder in: a model's own precisions, mixed as well
DECODER_DTYPES = (
    ("float64", "float64"),
    ("float32", "float32"),
    ("float32", "float64"),
    ("float64", "float32"),
    ("float16", "float16"),
    ("float16", "float64"),
    ("bfloat16", "float32"),
    ("bfloat16", "bfloat16"),
    ("torch.bfloat16", "torch.bfloat16"),
    ("torch.float16", "torch.float16"),
    ("torch.float16", "torch.bfloat16"),
    ("float64", "torch.bfloat16"),
)


def _as_list(values: np.ndarray) -> list[float]:
    return [float(x) for x in np.asarray(values, dtype=np.float64)]


def instance_case(rng: np.random.Generator, index: int) -> Case:
    """One instance case: a class of (p, q), a shape (V, n, top-k) and a scheme."""
    name = str(rng.choice(list(INSTANCE_CLASSES)))
    shape = str(rng.choice(SHAPES))
    v = {
        "small": int(rng.integers(2, MAX_V + 1)),
        "tiny_v": int(rng.integers(1, 3)),
        "extreme_n": int(rng.integers(2, 4)),
        "top_k": int(rng.integers(4, MAX_V + 1)),
        "huge_n": int(rng.integers(2, 5)),
    }[shape]
    if shape == "extreme_n":
        n = int(rng.integers(4, MAX_N_TINY_V + 1))
    elif shape == "huge_n":
        n = int(rng.choice(HUGE_N))
    else:
        n = int(rng.integers(1, 4))
    scheme = str(rng.choice(SCHEMES))
    p, q = INSTANCE_CLASSES[name](rng, v)
    v = len(p)
    rows: Any = _as_list(q)
    if scheme == "independent":
        n = min(n, 3)
        others = [INSTANCE_CLASSES[name](rng, v)[1] for _ in range(n - 1)]
        rows = [_as_list(q), *(_as_list(o) for o in others)]
    top_k = int(rng.integers(1, v + 1)) if shape == "top_k" or rng.random() < 0.2 else None
    distinct = scheme in ("without_replacement", "greedy")  # n distinct drafts
    if distinct and rng.random() < 0.9:  # mostly n <= draft support
        support = int(np.count_nonzero(np.asarray(q) > 0))
        n = max(1, min(n, support, top_k or support))
    return {
        "kind": "instance",
        "index": index,
        "class": name,
        "shape": shape,
        "p": _as_list(p),
        "q": rows,
        "n": n,
        "scheme": scheme,
        "top_k": top_k,
        "dtype": str(np.asarray(p).dtype),
        "tau": float(rng.choice(TAUS)),
        "decoder_dtypes": list(DECODER_DTYPES[int(rng.integers(len(DECODER_DTYPES)))]),
    }


MULTISTEP_RULES = ("ot", "kseq", "rrs", "sps", "spechub")


def multistep_case(rng: np.random.Generator, index: int) -> Case:
    """One multi-step case: a small model pair, possibly adversarial (draft = pure noise,
    near one-hot laws, sparse laws), a block length, paths and a method."""
    method = str(rng.choice(["token", "block", "gbv", "spectr"]))
    paths = 1 if method in ("token", "block") else int(rng.integers(1, 3))
    return {
        "kind": "multistep",
        "index": index,
        "class": "multistep",
        "model": str(rng.choice(["context-free", "markov", "tree"])),
        "vocab": int(rng.integers(2, 4)),
        "seed": int(rng.integers(2**31)),
        "distance": float(rng.choice([0.0, 0.3, 0.7, 1.0])),
        "concentration": float(rng.choice([0.05, 0.5, 1.0, 5.0])),
        "sparsity": float(rng.choice([0.0, 0.0, 0.3, 0.6])),
        "gamma": int(rng.integers(1, 3)),
        "paths": paths,
        "method": method,
        "rule": str(rng.choice(MULTISTEP_RULES)) if method == "spectr" else None,
    }


def _reproducers() -> list[Case]:
    """Issue 17's instances and later fuzz finds, as cases (indices 0 .. len - 1 of every
    campaign)."""
    rng = np.random.default_rng(0)
    p6, q6 = rng.dirichlet(np.ones(6)), rng.dirichlet(np.ones(6))
    q6[4] = 1e-60
    p_sub = [
        0.93549541169811889,
        2.2303647070117674e-12,
        2.2303647070117674e-12,
        0.06450468829519021,
        2.2303647070117674e-12,
        2.2303647070117673e-300,
    ]
    q_sub = [
        0.93549541168032668,
        2.2303647085042888e-12,
        2.2303647116879369e-12,
        0.064504688312982464,
        2.2303647064956370e-12,
        2.2303647080803042e-300,
    ]
    rest = 10.0 ** np.random.default_rng(17).uniform(-18, -16, size=30)
    q_peak = np.concatenate([[1.0 - rest.sum()], rest])  # q(top) = 1 - 8e-16 or so
    p_peak = np.random.default_rng(18).dirichlet(np.ones(31))
    base: Case = {"kind": "instance", "class": "reproducer", "shape": "small", "top_k": None}
    base |= {"dtype": "float64", "decoder_dtypes": ["float64", "float64"], "tau": 1e-3}
    return [
        # float32 p, float64 q with a draft probability of 1e-60 (verify_drafts refused it)
        base
        | {"p": _as_list(p6), "q": _as_list(q6 / q6.sum()), "n": 2, "scheme": "iid"}
        | {"decoder_dtypes": ["float32", "float64"], "drafts": [[4, 0]]},
        # subnormal column masses: GR plan vs verifier at tau 1e-3 and 1e-6
        base | {"p": p_sub, "q": q_sub, "n": 4, "scheme": "iid", "omegas": [[0, 2, 1, 5]]},
        base | {"p": p_sub, "q": q_sub, "n": 4, "scheme": "iid", "tau": 1e-6},
        # SpecHub's joint: a conditional of a 1e-12 draft set that did not sum to 1
        base
        | {"p": [0.0, 0.0, 1.0, 0.0], "n": 2, "scheme": "independent"}
        | {"q": [[1e-12, 0.0, 1.0 - 1e-12, 0.0], [1.0, 0.0, 0.0, 0.0]]},
        # GR without replacement on a peaked draft: the token for two given drafts only
        base
        | {"p": _as_list(p_peak), "q": _as_list(q_peak), "n": 5}
        | {"scheme": "without_replacement", "top_k": 30, "slices_only": True}
        | {"omegas": [[2, 11, 18, 0, 22], [2, 0, 1, 3, 4]]}
        | {"components": ["method:global_resolution"]},
        # fuzz seed 14: i.i.d. n = 30 on V = 2 and 3, where the GR series cancel (q n >> pi)
        base
        | {"p": [0.008397789088738823, 0.9916022109112611], "q": [5.087063092020835e-18, 1.0]}
        | {"n": 30, "scheme": "iid", "shape": "huge_n", "decoder_dtypes": ["float16", "float64"]},
        base
        | {"p": [1.677924639758689e-300, 0.13470033946167456, 0.8652996605383255]}
        | {"q": [0.25573782529591255, 1.7283169824378578e-200, 0.7442621747040875]}
        | {"n": 30, "scheme": "iid", "shape": "huge_n", "decoder_dtypes": ["float64", "float32"]},
        # fuzz seed 56, case 182: partial resolution's clock weights underflowed at n = 200
        base
        | {"p": [1.0, 4.166364669799805e-05], "q": [1.0, 4.351139068603516e-06]}
        | {"n": 200, "scheme": "iid", "shape": "huge_n", "dtype": "float16", "tau": 1e-6}
        | {"decoder_dtypes": ["float16", "float16"], "components": ["method:partial_resolution"]},
    ]


REPRODUCERS = _reproducers()
SURFACE_CASES: dict[str, Callable[[np.random.Generator, int], Case]] = {
    "engine": engine_case,
    "referee": referee_case,
    "decode_cli": decode_cli_case,
}


def make_case(seed: int, index: int) -> Case:
    """Case ``index`` of the campaign seeded by ``seed`` (independent of the other cases);
    indices below ``len(REPRODUCERS)`` are the fixed reproducers."""
    if index < len(REPRODUCERS):
        return REPRODUCERS[index] | {"index": index}
    rng = np.random.default_rng([seed, index])
    draw = rng.random()
    if draw < MULTISTEP_SHARE:
        return multistep_case(rng, index)
    bound = MULTISTEP_SHARE
    for kind, share in SURFACE_SHARES:
        bound += share
        if draw < bound:
            return SURFACE_CASES[kind](rng, index)
    if draw >= 1.0 - BUDGET_SHARE:
        return budget_case(rng, index)
    return instance_case(rng, index)


# ----- budget adherence (issue 24) -------------------------------------------------------------
# Global resolution's decoder call under tiny time budgets on peaked drafts with large n and k,
# every scheme: every valid row must get a token, and the call may overrun its budget by at
# most 20% plus one bounded step of work (otlp.fuzz.checks.BOUNDED_STEP_S, CPU share counted).
BUDGET_SHARE = 0.05  # fraction of cases that are budget cases (drawn from the same uniform)
BUDGET_VOCABS = (100, 300, 1000)
BUDGET_DRAFTS = (2, 4, 8)
BUDGET_SECONDS = (1e-4, 1e-3, 1e-2, 0.1)


def _softmax(logits: np.ndarray) -> np.ndarray:
    return normalised(np.exp(logits - logits.max()))


def budget_case(rng: np.random.Generator, index: int) -> Case:
    """One budget case: a peaked pair (softmaxes of correlated N(0, 9) logits at temperature
    0.05-0.1, or a near-one-hot draft), V up to 1,000, n up to 8, every scheme, tau down to
    1e-6 and a time budget of 1e-4 .. 0.1 s."""
    v = int(rng.choice(BUDGET_VOCABS))
    scheme = str(rng.choice(SCHEMES))
    n = 2 if scheme == "independent" else int(rng.choice(BUDGET_DRAFTS))
    logits = rng.normal(0.0, 3.0, v)
    temperature = float(rng.choice((0.05, 0.1)))

    def draft() -> np.ndarray:
        if rng.random() < 0.3:  # near one-hot: the top holds 1 - 1e-6
            out = dirichlet(rng, v) * 1e-6
            out[int(rng.integers(v))] += 1.0 - out.sum()
            return out
        return _softmax((0.8 * logits + 0.2 * rng.normal(0.0, 3.0, v)) / temperature)

    p = _softmax(logits / temperature)
    q = [_as_list(draft()), _as_list(draft())] if scheme == "independent" else _as_list(draft())
    return {
        "kind": "budget",
        "index": index,
        "class": "budget",
        "p": _as_list(p),
        "q": q,
        "n": n,
        "scheme": scheme,
        "top_k": None,
        "tau": float(rng.choice((1e-3, 1e-6))),
        "time_budget": float(rng.choice(BUDGET_SECONDS)),
    }
