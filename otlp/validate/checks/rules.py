"""Verification rules: [SpecHub] Theorems 1-4 and Corollary 1, RRS, K-SEQ, losslessness and
the own-joint optimum of every rule, and [Musco]'s single-draft couplings."""

from __future__ import annotations

import numpy as np

import otlp
from otlp import rules
from otlp.rules.couplings import communication_free_bound, gumbel_joint, minhash_joint
from otlp.rules.kseq import KSeq
from otlp.rules.spechub import SpecHub
from otlp.subset import optimal_acceptance
from otlp.validate.checks._relaxed import LP_TOL, Relaxed
from otlp.validate.registry import Case, Outcome, at_most, check, equality

LOSSLESS = [name for name in rules.names() if rules.get(name).lossless]


def _skip(name: str, inst: otlp.Instance) -> bool:
    """SpecHub is defined for two drafts; RRS without replacement needs n draft tokens."""
    if name == "spechub":
        return bool(inst.n != 2 or np.count_nonzero(inst.q_local) < 2)
    return bool("without" in name and np.count_nonzero(inst.q_local) < inst.n)


def _two_drafts(case: Case, max_vocab: int = 8) -> otlp.Instance:
    p, q = case.pair(max_vocab, degenerate=False)
    return otlp.Instance(p, q, 2)


def _heavy_hub(case: Case, low: float, high: float) -> otlp.Instance:
    """A pair whose top draft token holds a mass in [low, high]."""
    p, q = case.pair(7, min_vocab=3, degenerate=False)
    hub = case.rng.uniform(low, high)
    q = np.append(q[1:] * (1 - hub) / q[1:].sum(), hub)
    p = np.append(p[1:] * (1 - p[0]), p[0])
    case.record(p=p, q=q)
    return otlp.Instance(p, q, 2, renormalize=True)


# ----- [SpecHub] ------------------------------------------------------------------------------
@check(
    "spechub.thm1.lp_equivalence",
    "SpecHub",
    "Thm 1",
    "SpecHub's acceptance equals the optimum of the simplified LP over its hub joint (HiGHS)",
)
def _thm1(case: Case) -> Outcome:
    inst = _two_drafts(case)
    hub = SpecHub()
    return equality(hub.acceptance(inst), hub.lp_optimum(inst), LP_TOL)


@check(
    "spechub.thm2.lossless",
    "SpecHub",
    "Thm 2",
    "SpecHub outputs every token x with probability p(x) (exact output law)",
)
def _thm2(case: Case) -> Outcome:
    inst = _two_drafts(case)
    out = SpecHub().output_distribution(inst)
    return at_most(float(np.abs(out - inst.p).sum()), 0.0, 1e-10)


@check(
    "spechub.cor1.hub_acceptance",
    "SpecHub",
    "Cor. 1",
    "the hub token a = argmax q is output (and drafted) with probability p(a)",
)
def _cor1(case: Case) -> Outcome:
    inst = _two_drafts(case)
    ver = SpecHub().verification(inst)
    return equality(ver.accepted[ver.hub], inst.p_local[ver.hub], 1e-12)


@check(
    "spechub.thm3.beats_rrs",
    "SpecHub",
    "Thm 3",
    "q(a) / (1 - q(a)) > 1 - sum min(p, q) implies SpecHub acceptance >= RRS acceptance",
)
def _thm3(case: Case) -> Outcome:
    inst = _heavy_hub(case, 0.2, 0.9)
    q_a = inst.q_local.max()
    alpha = float(np.minimum(inst.p_local, inst.q_local).sum())
    if not q_a / (1 - q_a) > 1 - alpha:
        return Outcome(1.0, {"condition": 0.0})
    hub, rrs = SpecHub().acceptance(inst), rules.get("rrs").acceptance(inst)
    return at_most(rrs, hub, 1e-12, condition=1.0)


@check(
    "spechub.thm4.beats_iid_optimum",
    "SpecHub",
    "Thm 4",
    "q(a) > 1/2 implies SpecHub acceptance >= alpha* of two i.i.d. drafts (OTM)",
)
def _thm4(case: Case) -> Outcome:
    inst = _heavy_hub(case, 0.51, 0.95)
    hub = SpecHub().acceptance(inst)
    return at_most(optimal_acceptance(inst).alpha_star, hub, 1e-12)


def _reconstruction_error(case: Case, optimal: bool) -> Outcome:
    """[SpecHub] §3.2's reconstruction: residual mass only on tokens NOT drafted."""
    inst = case.instance(("iid", "without_replacement"), max_vocab=6, min_n=2, max_n=2)
    relaxed = Relaxed.of(inst)
    cols = relaxed.cols
    S = relaxed.random_optimum(case.rng) if optimal else relaxed.random_feasible(case.rng)
    C = np.zeros((inst.k + 1, cols.count))
    np.add.at(C, (cols.inc_token, cols.inc_col), S)
    row_res = inst.target_rows - C.sum(axis=1)
    col_res = cols.mass - C.sum(axis=0)
    drafted = np.zeros_like(C, dtype=bool)
    drafted[cols.inc_token, cols.inc_col] = True
    if row_res.sum() > 1e-15:
        C += np.where(drafted, 0.0, np.outer(row_res, col_res) / row_res.sum())
    err = np.abs(C.sum(axis=1) - inst.target_rows).sum() + np.abs(C.sum(axis=0) - cols.mass).sum()
    return at_most(float(err), 0.0, LP_TOL, gap=optimal_acceptance(inst).alpha_star - S.sum())


@check(
    "spechub.thm1.reconstruction_at_optimum",
    "SpecHub",
    "§3.2 / Thm 1 proof (corrected)",
    "from an OPTIMAL simplified-LP solution, the reconstruction (residual only on undrafted "
    "y) is a coupling of p_draft and p",
)
def _recon_opt(case: Case) -> Outcome:
    return _reconstruction_error(case, optimal=True)


@check(
    "spechub.thm1.reconstruction_any_solution.printed",
    "SpecHub",
    "§3.2 / Thm 1 proof (as printed)",
    "the reconstruction gives a valid coupling from any feasible simplified-LP solution",
    expect_fail=True,
)
def _recon_any(case: Case) -> Outcome:
    return _reconstruction_error(case, optimal=False)


# ----- every lossless rule --------------------------------------------------------------------
@check(
    "rules.lossless_output_is_p",
    "SpecHub/GR/Musco",
    "RRS Alg. 1, K-SEQ, SpecHub, OT",
    "every lossless rule's exact output law equals p over the whole vocabulary",
)
def _lossless(case: Case) -> Outcome:
    inst = case.instance(("iid",), max_vocab=6, max_n=3)
    worst = 0.0
    for name in LOSSLESS:
        rule = rules.get(name)
        if _skip(name, inst):
            continue
        worst = max(worst, float(np.abs(rule.output_distribution(inst) - inst.p).sum()))
    return at_most(worst, 0.0, 1e-9)


@check(
    "rules.own_joint_optimum",
    "GR",
    "Thm 3.1 (as an upper bound)",
    "no lossless rule accepts more than alpha* of its own draft joint; ot and canonical reach it",
)
def _own_optimum(case: Case) -> Outcome:
    inst = case.instance(("iid",), max_vocab=6, max_n=3)
    margin = np.inf
    for name in LOSSLESS:
        if _skip(name, inst):
            continue
        rule = rules.get(name)
        bound, value = rule.alpha_star(inst), rule.acceptance(inst)
        margin = min(margin, bound + 1e-9 - value)
        if name in ("ot", "canonical"):
            margin = min(margin, 1e-8 - abs(bound - value))
    return Outcome(float(margin))


@check(
    "rules.kseq.one_minus_1_over_e",
    "GR",
    "§2 (SpecTr's K-SEQ)",
    "K-SEQ with rho*: rho* in [1, n] valid (p_res >= 0, root when > 1) and acceptance >= "
    "(1 - 1/e) alpha*",
)
def _kseq(case: Case) -> Outcome:
    return kseq_bound(case.instance(("iid",), max_vocab=7, max_n=5))


def kseq_bound(inst: otlp.Instance) -> Outcome:
    """The K-SEQ check on one instance: SpecTr's acceptance >= (1 - 1/e) alpha* at rho*
    (undecorated, so that mutation testing reaches the bound)."""
    kseq = KSeq()
    par = kseq.parameters(inst)
    q = np.append(inst.q_local, 0.0)
    valid = float(np.min(inst.target_rows - par.c * q * par.accept))
    root = abs(par.c - par.rho) if par.rho > 1.0 else 0.0
    alpha = optimal_acceptance(inst).alpha_star
    procedural = kseq.procedural_acceptance(inst)
    margin = min(
        procedural - (1 - np.exp(-1.0)) * alpha + 1e-12,
        kseq.acceptance(inst) - procedural + 1e-12,
        valid + 1e-12,
        1e-8 * par.rho - root,
        par.rho - 1 + 1e-12,
        inst.n - par.rho + 1e-12,
    )
    return Outcome(float(margin), {"ratio": procedural / max(alpha, 1e-300)})


@check(
    "rules.rrs_without_replacement_beats_rrs",
    "SpecHub",
    "§2 / Table 4 (RRSw vs RRS)",
    "alpha* of drafts without replacement >= alpha* of i.i.d. drafts",
)
def _wr_beats_iid(case: Case) -> Outcome:
    p, q = case.pair(6, degenerate=False)
    n = int(case.rng.integers(2, min(4, p.shape[0]) + 1))
    iid = optimal_acceptance(otlp.Instance(p, q, n)).alpha_star
    wr = optimal_acceptance(otlp.Instance(p, q, n, "without_replacement")).alpha_star
    return at_most(iid, wr, 1e-12)


# ----- [Musco]: single-draft couplings --------------------------------------------------------
@check(
    "musco.coupling.order",
    "Musco",
    "Couplings (TV, MinHash, Gumbel)",
    "1 - TV (optimal coupling, = speculative sampling) >= Gumbel >= MinHash >= (1 - TV) / (1 + TV)",
)
def _coupling_order(case: Case) -> Outcome:
    inst = case.instance(("iid",), max_vocab=7, max_n=1, top_k=False)
    sps, gumbel, minhash = (rules.get(n).acceptance(inst) for n in ("sps", "gumbel", "minhash"))
    tv = 0.5 * float(np.abs(inst.p - inst.q).sum())
    margin = min(
        1e-12 - abs(sps - (1 - tv)),
        sps - gumbel + 1e-12,
        gumbel - minhash + 1e-12,
        minhash - communication_free_bound(inst) + 1e-12,
    )
    return Outcome(float(margin), {"sps": sps, "gumbel": gumbel, "minhash": minhash})


@check(
    "musco.coupling.marginals",
    "Musco",
    "Couplings (MinHash, Gumbel)",
    "the weighted-MinHash and Gumbel-max joints have marginals q and p",
)
def _coupling_marginals(case: Case) -> Outcome:
    p, q = case.pair(7)
    err = 0.0
    for joint in (minhash_joint(p, q), gumbel_joint(p, q)):
        rows, cols = joint.sum(axis=1), joint.sum(axis=0)
        err = max(
            err,
            min(
                np.abs(rows - q).sum() + np.abs(cols - p).sum(),
                np.abs(rows - p).sum() + np.abs(cols - q).sum(),
            ),
        )
    return at_most(err, 0.0, 1e-9)


@check(
    "musco.gumbel_trick.printed",
    "Musco",
    "Gumbel-max trick (as printed)",
    "-ln(-ln(1/u)), u ~ U(0,1), is a standard Gumbel sample (KS distance <= 0.035 on 4000)",
    expect_fail=True,
)
def _gumbel_printed(case: Case) -> Outcome:
    u = case.rng.random(4000)
    with np.errstate(invalid="ignore"):
        g = -np.log(-np.log(1 / u))
    return _gumbel_ks(g)


@check(
    "musco.gumbel_trick.corrected",
    "Musco",
    "Gumbel-max trick (corrected)",
    "-ln(-ln u), u ~ U(0,1), is a standard Gumbel sample (KS distance <= 0.035 on 4000)",
)
def _gumbel_corrected(case: Case) -> Outcome:
    return _gumbel_ks(-np.log(-np.log(case.rng.random(4000))))


def _gumbel_ks(g: np.ndarray) -> Outcome:
    if not np.all(np.isfinite(g)):
        return Outcome(-1.0, {"nan_share": float(np.mean(~np.isfinite(g)))})
    g = np.sort(g)
    cdf = np.exp(-np.exp(-g))
    grid = np.arange(1, g.size + 1) / g.size
    ks = float(max(np.abs(cdf - grid).max(), np.abs(cdf - grid + 1 / g.size).max()))
    return at_most(ks, 0.035, 0.0)  # 0.035 ~ 1.63 / sqrt(n): a 1e-2 false alarm rate


# ----- [SpecHub] Appendix F: the max-flow form of the simplified LP (k = 2) ------------------
def _pair_joint(case: Case) -> tuple[otlp.Instance, np.ndarray, float]:
    """Two drafts: an i.i.d. or a hub joint Q (k x k) and its simplified-LP optimum."""
    inst = _two_drafts(case, max_vocab=6)
    q = inst.q_local
    if case.rng.random() < 0.5:
        return inst, np.outer(q, q), optimal_acceptance(inst).alpha_star
    hub = SpecHub()
    members, mass = hub.draft_joint(inst).enumerate()
    joint = np.zeros((inst.k, inst.k))
    np.add.at(joint, (members[:, 0], members[:, 1]), mass)
    return inst, joint, hub.lp_optimum(inst)


def _max_flow(edges: list[tuple[object, object, float]]) -> float:
    import networkx as nx

    graph = nx.DiGraph()
    for u, v, cap in edges:
        graph.add_edge(u, v, capacity=float(cap))
    # Edmonds-Karp: networkx's default preflow-push fails on capacities near 1e-23
    return float(nx.maximum_flow_value(graph, "s", "t", flow_func=nx.flow.edmonds_karp))


@check(
    "spechub.appF.maxflow_equals_lp",
    "SpecHub",
    "App. F",
    "the network s -> v (sum_x Q(v, x)), u -> v (Q(u, v)), v -> t (p(v)) has max flow equal to "
    "the simplified LP's optimum (i.i.d. and hub joints; paths of several hops never help)",
)
def _app_f_printed(case: Case) -> Outcome:
    inst, joint, optimum = _pair_joint(case)
    k, p = inst.k, inst.p_local
    edges: list[tuple[object, object, float]] = [("s", u, joint[u].sum()) for u in range(k)]
    edges += [(v, "t", p[v]) for v in range(k)]
    edges += [(u, v, joint[u, v]) for u in range(k) for v in range(k) if u != v]
    return equality(_max_flow(edges), optimum, 1e-9)


@check(
    "spechub.appF.maxflow_two_layers",
    "SpecHub",
    "App. F (cross-check)",
    "with separate first-draft and second-draft layers (s -> u1, u1 -> u*, u1 -> v2 (Q(u, v)), "
    "v2 -> v*, v* -> t (p(v))), the max flow equals the simplified LP's optimum",
)
def _app_f_fixed(case: Case) -> Outcome:
    inst, joint, optimum = _pair_joint(case)
    k, p = inst.k, inst.p_local
    edges: list[tuple[object, object, float]] = [("s", ("1", u), joint[u].sum()) for u in range(k)]
    edges += [(("1", u), ("*", u), 2.0) for u in range(k)]  # 2 > total mass: uncapacitated
    edges += [(("1", u), ("2", v), joint[u, v]) for u in range(k) for v in range(k) if u != v]
    edges += [(("2", v), ("*", v), 2.0) for v in range(k)] + [
        (("*", v), "t", p[v]) for v in range(k)
    ]
    return equality(_max_flow(edges), optimum, 1e-9)
