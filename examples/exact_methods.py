"""Every exact method solves the same optimal transport: the same acceptance, every plan verified.

The optimal acceptance α* comes from subset selection alone ([GR] Theorem 3.1); each method of
`otlp.solve` builds its own problem (LP, max-flow network or transport problem), and the
verifier checks each plan's marginals, sign, acceptance against α* and every conditional
π(·|ω) a decoder samples from. See the guide page "Exact optimal transport".
"""

import otlp
from otlp.instances import zipf_llm_pair

p, q = zipf_llm_pair(2_000, temperature=1.0, similarity=0.7, seed=1)
inst = otlp.Instance(p, q, n=2, scheme="iid", top_k=10)
print(f"alpha* = {otlp.optimal_acceptance(inst).alpha_star:.6f}")

for method in ("maxflow_cs", "maxflow", "highs", "highs_full", "networkx"):
    plan = otlp.solve(inst, method=method)
    report = plan.verification
    print(f"{method:>10}: acceptance {plan.acceptance:.6f}, verified {report.ok}")
