"""One node of a draft tree: each node rule's exact conditional law and its sampled token.

The kernels of the ``node`` rules of :mod:`otlp.verification.rule_table`, registered there
by name. ``p``, ``q`` are a node's checked float64 target and draft laws (``q`` restricted to
its top-k where asked), ``omega`` the children's drafted tokens in draw order, ``u`` the
node's uniforms (n + 2 of them). :func:`verify_tree` samples each token from its rule's
``token``; :func:`~otlp.verification.tree.outcome_law` sums the rule's ``law``, which is the
sampler's law given the drafts (to rounding for global resolution's compiled kernels).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from otlp.decoder_rows.inputs import DecoderBatch
from otlp.global_resolution.rows import GlobalResolutionRows
from otlp.rules.base import residual
from otlp.rules.kseq import kseq_parameters
from otlp.rules.rrs import replacement_residuals, without_replacement_walk
from otlp.rules.sequential import sequential_conditionals
from otlp.rules.single import kernel_rows, speculative_kernel
from otlp.rules.spechub import hub_candidates, hub_verification
from otlp.solvers.arrays import FloatArray, IntArray
from otlp.solvers.node_rules import hub_token, kseq_token
from otlp.verification import rule_table
from otlp.verification.drafting import check_node
from otlp.verification.rule_table import NodeKernel, node_kernel, register_node_kernel


def node_law(
    p: FloatArray,
    q: FloatArray,
    omega: IntArray,
    *,
    method: str,
    scheme: str = "iid",
    tau: float = 1e-3,
) -> FloatArray:
    """Exact law pi(. | omega) of a node's verified token over the whole vocabulary.

    ``p``, ``q`` are float64 probability vectors (the node's target and draft laws), ``omega``
    the children's drafted tokens in draw order (q > 0 at each). Global resolution's law is
    its plan's slice by the object API (the compiled kernel that :func:`verify_tree` samples
    agrees with it to rounding). No drafts: p itself.
    """
    rule = rule_table.get(method)
    if rule.protocol != "node":
        names = ", ".join(rule_table.names("node"))
        raise ValueError(f"method: {rule.name!r} is a {rule.protocol} rule; node rules: {names}")
    omega, (p, q) = check_node(omega, p=p, q=q)
    if omega.shape[0] == 0:
        return p
    return node_kernel(rule.name).law(p, q, omega, scheme, tau)


def draw(law: FloatArray, u: float) -> int:
    """Inverse-CDF draw from a (possibly unnormalised) law with one uniform; never a token of
    zero probability."""
    cdf = np.cumsum(law)
    idx = int(np.searchsorted(cdf, u * cdf[-1], side="right"))
    return min(idx, int(np.flatnonzero(law > 0)[-1]))


# ----- rejection rules: speculative sampling, RRS with and without replacement --------------
def _rejection_token(
    p: FloatArray, q: FloatArray, omega: IntArray, scheme: str, u: FloatArray
) -> int:
    """Recursive rejection sampling ([SpecHub] Algorithm 1) run lazily: draft j is accepted
    with probability min(1, p_j(x_j) / q_j(x_j)); only a rejection computes the residual
    p_{j+1} = norm(max(p_j - q_j, 0)) (and, without replacement, q_{j+1} = q_j with x_j
    removed, renormalised). One draft: speculative sampling."""
    target, draft = p, q
    for j, x in enumerate(omega):
        if u[j] * draft[x] < target[x]:  # u < min(1, p_j(x) / q_j(x)), q_j(x) > 0
            return int(x)
        target = residual(target, draft)
        if scheme == "without_replacement" and j < omega.shape[0] - 1:
            draft = draft.copy()
            draft[x] = 0.0
            draft /= draft.sum()  # the rest summed: 1 - q(x) cancels when q(x) is near 1
    return draw(target, float(u[omega.shape[0]]))


def _sps_law(p: FloatArray, q: FloatArray, omega: IntArray, scheme: str, tau: float) -> FloatArray:
    return kernel_rows(*speculative_kernel(p, q), omega[:1])[0]


def _sps_token(
    p: FloatArray, q: FloatArray, omega: IntArray, scheme: str, tau: float, u: FloatArray
) -> int:
    return _rejection_token(p, q, omega[:1], scheme, u)


def _rrs_law(p: FloatArray, q: FloatArray, omega: IntArray, scheme: str, tau: float) -> FloatArray:
    n = omega.shape[0]
    accept, _, final = replacement_residuals(p, np.broadcast_to(q, (n, q.shape[0])))
    return sequential_conditionals(omega[None], accept[np.arange(n), omega][None], final)[0]


def _rrs_token(
    p: FloatArray, q: FloatArray, omega: IntArray, scheme: str, tau: float, u: FloatArray
) -> int:
    return _rejection_token(p, q, omega, scheme, u)


def _rrs_without_replacement_law(
    p: FloatArray, q: FloatArray, omega: IntArray, scheme: str, tau: float
) -> FloatArray:
    return sequential_conditionals(omega[None], *without_replacement_walk(p, q, omega[None]))[0]


# ----- K-SEQ and SpecHub -------------------------------------------------------------------
def _kseq_law(p: FloatArray, q: FloatArray, omega: IntArray, scheme: str, tau: float) -> FloatArray:
    par = kseq_parameters(p, q, omega.shape[0])
    return sequential_conditionals(omega[None], par.accept[omega][None], par.residual)[0]


def _kseq_token(
    p: FloatArray, q: FloatArray, omega: IntArray, scheme: str, tau: float, u: FloatArray
) -> int:
    return int(kseq_token(p, q, 1.0, 1.0, omega, u))  # kseq_parameters' accept and residual


def _spechub_law(
    p: FloatArray, q: FloatArray, omega: IntArray, scheme: str, tau: float
) -> FloatArray:
    if omega.shape[0] == 1:
        return _sps_law(p, q, omega, scheme, tau)
    ver = hub_verification(p, q, int(np.argmax(q)))
    return sequential_conditionals(*hub_candidates(ver, omega[None]))[0]


def _spechub_token(
    p: FloatArray, q: FloatArray, omega: IntArray, scheme: str, tau: float, u: FloatArray
) -> int:
    if omega.shape[0] == 1:
        return _rejection_token(p, q, omega, scheme, u)
    return int(hub_token(p, q, 1.0, 1.0, omega, u))


# ----- optimal transport: global resolution, max-flow, partial resolution ------------------
def _plan_law(
    p: FloatArray, q: FloatArray, omega: IntArray, method: str, scheme: str, tau: float
) -> FloatArray:
    """pi(. | omega) from the solved plan of (p, q, n, scheme) (maxflow_cs, global resolution)."""
    from otlp.api import solve
    from otlp.instance import Instance

    inst = Instance(p, q, omega.shape[0], scheme, renormalize=True)
    if method == "global_resolution":
        plan = solve(inst, method, check=False, tau=tau)
    else:
        plan = solve(inst, method, check=False)
    return inst.global_law(np.clip(plan.local_slice(omega), 0.0, None))


def _global_resolution_law(
    p: FloatArray, q: FloatArray, omega: IntArray, scheme: str, tau: float
) -> FloatArray:
    return _plan_law(p, q, omega, "global_resolution", scheme, tau)


def _global_resolution_token(
    p: FloatArray, q: FloatArray, omega: IntArray, scheme: str, tau: float, u: FloatArray
) -> int:
    """Global resolution's token at a node on the node's checked, renormalised (and top-k
    restricted) laws (:meth:`GlobalResolutionRows.node_token`)."""
    return GlobalResolutionRows(tau).node_token(p, q, omega, u, scheme=scheme)


def _global_resolution_fused(
    p: NDArray[np.floating],
    q: NDArray[np.floating],
    omega: IntArray,
    scheme: str,
    tau: float,
    u: FloatArray,
    top_k: int | None,
    atol: float,
) -> int:
    """Global resolution's token on the rows as given, -1 where the restricted path must
    decide (:meth:`GlobalResolutionRows.fused_node_token`)."""
    rows = GlobalResolutionRows(tau)
    return rows.fused_node_token(p, q, omega, u, scheme=scheme, top_k=top_k, atol=atol)


def _maxflow_cs_law(
    p: FloatArray, q: FloatArray, omega: IntArray, scheme: str, tau: float
) -> FloatArray:
    return _plan_law(p, q, omega, "maxflow_cs", scheme, tau)


def _maxflow_cs_token(
    p: FloatArray, q: FloatArray, omega: IntArray, scheme: str, tau: float, u: FloatArray
) -> int:
    return draw(_maxflow_cs_law(p, q, omega, scheme, tau), float(u[0]))


def _race_law(p: FloatArray, q: FloatArray, omega: IntArray, scheme: str, tau: float) -> FloatArray:
    """Partial resolution's law given the drafted tuple: the clock race's
    (:meth:`otlp.partial_resolution.ClockPartition.race_conditional`), what the node samples."""
    from otlp.instance import Instance
    from otlp.partial_resolution import ClockPartition

    inst = Instance(p, q, omega.shape[0], "iid", renormalize=True)
    local = ClockPartition.of(inst).race_conditional(inst.to_local(omega))
    return np.clip(inst.global_law(local), 0.0, None)


def _partial_resolution_row(
    p: NDArray[np.floating],
    q: NDArray[np.floating],
    omega: IntArray,
    u: FloatArray,
    top_k: int | None,
    atol: float,
) -> int:
    """Partial resolution's token: the fused decoder row of :func:`otlp.verify_drafts` (the
    clock race, then the residual; top-k inside the kernel); ``u[:n]`` are the clocks,
    ``u[n:n + 2]`` the residual draw. Its law given the drafted tuple is :func:`node_law`'s
    (the race's exact law, Lemma 6 of docs/partial-resolution.md)."""
    from otlp.verification.position import partial_resolution_rows

    u = u[: omega.shape[0] + 2]
    batch = DecoderBatch.of_row(p, q, omega, u, scheme="iid", top_k=top_k, atol=atol)
    return int(partial_resolution_rows(batch).tokens[0])


def _partial_resolution_fused(
    p: NDArray[np.floating],
    q: NDArray[np.floating],
    omega: IntArray,
    scheme: str,
    tau: float,
    u: FloatArray,
    top_k: int | None,
    atol: float,
) -> int:
    """The row on the rows as given; -1 where the kernel refuses them (the restricted path
    decides, and names the row in its error)."""
    try:
        return _partial_resolution_row(p, q, omega, u, top_k, atol)
    except ValueError:
        return -1


def _partial_resolution_token(
    p: FloatArray, q: FloatArray, omega: IntArray, scheme: str, tau: float, u: FloatArray
) -> int:
    """The row on the node's checked, renormalised (top-k restricted) laws."""
    return _partial_resolution_row(p, q, omega, u, None, 1e-9)


def _always(scheme: str, top_k: int | None) -> bool:
    return True


def _iid_or_top_k(scheme: str, top_k: int | None) -> bool:
    """Global resolution's fused rows read the rows as given for i.i.d. drafts, and from a
    top-k draft without replacement (the kernel restricts q itself)."""
    return scheme == "iid" or top_k is not None


for _name, _kernel in {
    "sps": NodeKernel(_sps_law, _sps_token),
    "rrs": NodeKernel(_rrs_law, _rrs_token),
    "rrs_without_replacement": NodeKernel(_rrs_without_replacement_law, _rrs_token),
    "kseq": NodeKernel(_kseq_law, _kseq_token),
    "spechub": NodeKernel(_spechub_law, _spechub_token),
    "global_resolution": NodeKernel(
        _global_resolution_law, _global_resolution_token, _global_resolution_fused, _iid_or_top_k
    ),
    "maxflow_cs": NodeKernel(_maxflow_cs_law, _maxflow_cs_token),
    "partial_resolution": NodeKernel(
        _race_law, _partial_resolution_token, _partial_resolution_fused, _always
    ),
}.items():
    register_node_kernel(_name, _kernel)
