"""[Musco] inner-product sketching: unbiasedness and the variance bounds 2/m (JL, AMS,
CountSketch, threshold sampling), 1.6/m (QJL), 2/(m-1) (priority sampling), the expected
threshold-sample size, and the JL dimension bound with its constant measured.

Monte Carlo checks use 4000 independent sketchers per instance; margins are in standard
errors of the Monte Carlo estimate (5 standard errors of slack), so a pass is a statistical
statement with a false-alarm rate below 1e-6 per instance.
"""

from __future__ import annotations

import math

import numpy as np

from otlp import sketch
from otlp.validate.registry import Case, Outcome, check, reduce_pair

COPIES = 4000
Z = 5.0


def _vectors(case: Case) -> tuple[np.ndarray, np.ndarray]:
    """(a, b): a suite pair (p and q over their top 64 tokens) or random vectors that are
    dense, sparse or heavy-tailed, with correlated supports."""
    rng = case.rng
    if case.item is not None:
        a, b = reduce_pair(case.item.p, case.item.q, 64)
    else:
        d = int(rng.integers(8, 65))
        kind = rng.integers(3)
        a = rng.standard_normal(d) if kind == 0 else rng.standard_cauchy(d)
        b = 0.6 * a + rng.standard_normal(d) * rng.uniform(0.2, 1.5)
        if kind == 2:
            a[rng.random(d) < 0.5] = 0.0
            b[rng.random(d) < 0.5] = 0.0
        if not np.any(a * b):
            a[0] = b[0] = 1.0
    case.record(a=a, b=b)
    return a, b


def _m(case: Case, d: int) -> int:
    return int(case.rng.integers(2, max(3, d // 2) + 1))


def _unbiased_and_bounded(
    estimates: np.ndarray, truth: float, bound: float, exact_var: float | None = None
) -> Outcome:
    """Margin (in standard errors) of: mean = truth, and variance <= bound. ``exact_var``
    (when known) sets the mean's standard error: rare large terms (tiny inclusion
    probabilities) make the sample variance unreliable on skewed real vectors."""
    r = estimates.shape[0]
    mean, var = float(estimates.mean()), float(estimates.var(ddof=1))
    spread = var if exact_var is None else max(var, exact_var)
    se_mean = math.sqrt(spread / r) + 1e-15 * (abs(truth) + 1)
    centred = estimates - mean
    se_var = math.sqrt(max(float((centred**4).mean()) - var * var, 0.0) / r) + 1e-15
    z_mean = abs(mean - truth) / se_mean
    z_var = (var - bound) / se_var
    return Outcome(
        min(Z - z_mean, Z - z_var),
        {"bias_z": z_mean, "variance_over_bound": var / bound if bound > 0 else 0.0},
    )


def _sampling_bound(a: np.ndarray, b: np.ndarray, m: float) -> float:
    """2/m max(||a_I||^2 ||b||^2, ||a||^2 ||b_I||^2), I = supp(a) ∩ supp(b)."""
    inter = (a != 0) & (b != 0)
    return 2.0 / m * max((a[inter] ** 2).sum() * (b @ b), (a @ a) * (b[inter] ** 2).sum())


def _linear(case: Case, method: str) -> Outcome:
    a, b = _vectors(case)
    m = _m(case, a.shape[0])
    est = sketch.estimate_inner_products(method, a, b, m, case.rng, COPIES)
    return _unbiased_and_bounded(est, float(a @ b), 2.0 / m * (a @ a) * (b @ b))


@check(
    "musco.jl_gaussian.unbiased_2_over_m",
    "Musco",
    "Linear sketching theorem",
    "Gaussian JL: E<Pa, Pb> = <a, b> and Var <= 2/m ||a||^2 ||b||^2",
    cost=0.25,
)
def _jl_gauss(case: Case) -> Outcome:
    return _linear(case, "jl_gaussian")


@check(
    "musco.jl_sign.unbiased_2_over_m",
    "Musco",
    "Linear sketching theorem (+-1, AMS)",
    "+-1 (AMS) JL: E<Pa, Pb> = <a, b> and Var <= 2/m ||a||^2 ||b||^2",
    cost=0.25,
)
def _jl_sign(case: Case) -> Outcome:
    return _linear(case, "jl_sign")


@check(
    "musco.countsketch.unbiased_2_over_m",
    "Musco",
    "Fast linear sketching",
    "CountSketch: unbiased with Var <= 2/m ||a||^2 ||b||^2",
    cost=0.25,
)
def _countsketch(case: Case) -> Outcome:
    return _linear(case, "countsketch")


def _qjl(case: Case, constant: str) -> Outcome:
    a, b = _vectors(case)
    m = _m(case, a.shape[0])
    est = sketch.estimate_inner_products("qjl", a, b, m, case.rng, COPIES) * (
        sketch.QJL_CONSTANTS[constant] / sketch.QJL_CONSTANTS["corrected"]
    )
    return _unbiased_and_bounded(est, float(a @ b), 1.6 / m * (a @ a) * (b @ b))


@check(
    "musco.qjl.corrected_unbiased_1_6_over_m",
    "Musco",
    "QJL theorem (corrected constant)",
    "F = sqrt(pi/2)/m ||a|| <sign(Pa), Pb> is unbiased with Var <= 1.6/m ||a||^2 ||b||^2",
    cost=0.25,
)
def _qjl_fixed(case: Case) -> Outcome:
    return _qjl(case, "corrected")


@check(
    "musco.qjl.printed_constant",
    "Musco",
    "QJL estimator (as printed)",
    "F = sqrt(pi)/m ||a|| <sign(Pa), Pb> is unbiased (it is biased by sqrt(2))",
    expect_fail=True,
    cost=0.25,
)
def _qjl_printed(case: Case) -> Outcome:
    return _qjl(case, "printed")


@check(
    "musco.threshold.unbiased_2_over_m",
    "Musco",
    "Threshold sampling theorem",
    "threshold sampling: unbiased (Monte Carlo) and its exact variance "
    "sum (a_i b_i)^2 (1/p_i - 1) <= 2/m max(||a_I||^2 ||b||^2, ||a||^2 ||b_I||^2)",
    cost=0.25,
)
def _threshold(case: Case) -> Outcome:
    a, b = _vectors(case)
    m = _m(case, a.shape[0])
    est = sketch.estimate_inner_products("threshold", a, b, m, case.rng, COPIES)
    p = np.minimum(1.0, np.minimum(m * a * a / (a @ a), m * b * b / (b @ b)))
    inter = (a != 0) & (b != 0)
    exact = float(((a * b)[inter] ** 2 * (1 / p[inter] - 1)).sum())
    bound = _sampling_bound(a, b, m)
    mc = _unbiased_and_bounded(est, float(a @ b), exact, exact_var=exact)
    margin = min(mc.margin, (bound - exact) / bound + 1e-12 if bound > 0 else 1.0)
    return Outcome(margin, {**mc.values, "exact_variance_over_bound": exact / max(bound, 1e-300)})


@check(
    "musco.priority.unbiased_2_over_m_minus_1",
    "Musco",
    "Priority sampling bound",
    "priority sampling keeps exactly min(m, nnz) entries, is unbiased and has "
    "Var <= 2/(m-1) max(||a_I||^2 ||b||^2, ||a||^2 ||b_I||^2)",
    cost=0.25,
)
def _priority(case: Case) -> Outcome:
    a, b = _vectors(case)
    m = _m(case, a.shape[0])
    sk = sketch.PrioritySampling(m, a.shape[0], case.rng, COPIES)
    sa, sb = sk.sketch(a), sk.sketch(b)
    sizes_ok = np.all(sa.size == min(m, np.count_nonzero(a)))
    est = np.atleast_1d(sk.estimate(sa, sb))
    bound = _sampling_bound(a, b, m - 1)
    # no exact variance here: the mean's standard error uses the bound under test
    mc = _unbiased_and_bounded(est, float(a @ b), bound, exact_var=bound)
    return Outcome(mc.margin if sizes_ok else -1.0, mc.values)


def _threshold_size(case: Case) -> tuple[float, float, float, float]:
    a, _ = _vectors(case)
    a = a * np.where(case.rng.random(a.shape[0]) < 0.2, 10.0, 1.0)  # a few heavy entries
    m = _m(case, a.shape[0])
    sk = sketch.ThresholdSampling(m, a.shape[0], case.rng, COPIES)
    sizes = sk.sketch(a).size
    probs = np.minimum(1.0, m * a * a / (a @ a))
    exact_sd = math.sqrt(float((probs * (1 - probs)).sum())) + 1e-12
    return float(m), sk.expected_size(a), float(sizes.mean()), exact_sd


@check(
    "musco.threshold.expected_size_at_most_m",
    "Musco",
    "Threshold sampling claim",
    "E|S(a)| = sum min(1, m a_i^2/||a||^2) <= m (exact, and the Monte Carlo mean agrees)",
)
def _size(case: Case) -> Outcome:
    m, exact, mean, sd = _threshold_size(case)
    z = abs(mean - exact) / (sd / math.sqrt(COPIES))
    return Outcome(min(m - exact + 1e-12, Z - z), {"expected_size": exact, "m": m})


@check(
    "musco.threshold.expected_size_equals_m.printed",
    "Musco",
    "Threshold sampling theorem (as printed)",
    "E|S(a)| = m",
    expect_fail=True,
)
def _size_printed(case: Case) -> Outcome:
    m, exact, _, _ = _threshold_size(case)
    return Outcome(1e-9 * m - abs(m - exact), {"expected_size": exact, "m": m})


@check(
    "musco.jl.dimension_bound",
    "Musco",
    "JL lemma (Dasgupta-Gupta constant)",
    "with m = ceil(8 ln n / (eps^2/2 - eps^3/3)) a Gaussian map keeps all n(n-1)/2 squared "
    "distances within 1 +- eps except with probability <= n(n-1) exp(-m (eps^2/2 - eps^3/3) / 2) "
    "(<= 1/n^2); values report the measured constant C = m eps_worst^2 / ln n",
    cost=0.25,
    suite=False,
)
def _jl_dimension(case: Case) -> Outcome:
    rng = case.rng
    n, d = int(rng.integers(5, 21)), 512
    eps = float(rng.choice([0.4, 0.5]))
    rate = eps**2 / 2 - eps**3 / 3
    m = math.ceil(8 * math.log(n) / rate)
    case.record(n=n, eps=eps, m=m)
    points = rng.standard_normal((n, d)) * rng.exponential(size=(n, 1))
    i, j = np.triu_indices(n, 1)
    diffs = points[i] - points[j]
    trials = 20
    worst = np.empty(trials)
    for t in range(trials):
        proj = diffs @ rng.standard_normal((d, m)) / math.sqrt(m)
        worst[t] = np.abs((proj**2).sum(axis=1) / (diffs**2).sum(axis=1) - 1).max()
    failures = float((worst > eps).mean())
    bound = min(1.0, n * (n - 1) * math.exp(-m * rate / 2))
    se = math.sqrt(max(bound * (1 - bound), 1 / trials) / trials)
    constant = float(np.median(m * worst**2 / math.log(n)))
    return Outcome(
        (bound + Z * se - failures) / se,
        {"failure_rate": failures, "union_bound": bound, "measured_C": constant, "m": m},
    )
