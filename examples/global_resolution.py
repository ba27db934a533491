"""Global resolution: a lazy plan solved per drafted tuple, with a certified deviation.

`otlp.solve(inst, "global_resolution")` returns at once; each drafted ω solves only the convex
system it needs ([GR] §6), and the token report says how far the slice can be from the optimum.
`otlp.verify` then materialises every entry and checks the bounds of Lemma 6.6 (L1 ≤ 15τ,
acceptance gap ≤ 10τ). See the guide page "Global resolution".
"""

import numpy as np

import otlp
from otlp.instances import zipf_llm_pair

p, q = zipf_llm_pair(10_000, temperature=1.0, similarity=0.7, seed=3)
inst = otlp.Instance(p, q, n=3, scheme="iid", top_k=20)
tau = 1e-3
plan = otlp.solve(inst, "global_resolution", tau=tau, check=False)

rng = np.random.default_rng(0)
omega = inst.sample_drafts(rng, 1)[0]
probs, report = plan.token_report(omega)
print(f"slice of omega = {omega.tolist()}: sums to {probs.sum():.12f}, fallback {report.fallback}")

report = otlp.verify(plan)  # the verifier's tolerances for this method are Lemma 6.6's
print(f"acceptance {report.acceptance:.6f} against alpha* {report.alpha_star:.6f}")
print(f"target L1 {report.target_l1:.1e} (bound 15 tau = {15 * tau:g}), verified {report.ok}")
print(f"acceptance gap {abs(report.acceptance_gap):.1e} (bound 10 tau = {10 * tau:g})")
