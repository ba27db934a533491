"""Verification rules: exact acceptance and exact output law, so losslessness is a test.

Each rule of `otlp.rules` draws its own draft joint and computes its acceptance and its output
distribution over the whole vocabulary exactly (never by Monte Carlo). A lossless rule's output
law is p; mentored decoding trades a KL budget for acceptance. See the guide page
"Verification rules".
"""

import numpy as np

import otlp
import otlp.rules
from otlp.instances import zipf_llm_pair

p, q = zipf_llm_pair(1_000, temperature=1.0, similarity=0.6, seed=4)
inst = otlp.Instance(p, q, n=2, top_k=20)
print(f"alpha* (i.i.d. drafts) = {otlp.optimal_acceptance(inst).alpha_star:.4f}")
print("rule                     acceptance  L1(output, p)")
for name in otlp.rules.names():
    options = {"kl_budget": 0.05} if name == "mentored" else {}
    rule = otlp.rules.get(name, **options)
    output = rule.output_distribution(inst)
    print(f"{name:<24} {rule.acceptance(inst):.4f}      {np.abs(output - p).sum():.1e}")

rrs = otlp.rules.get("rrs")
tokens, accepted = rrs.sample(inst, np.random.default_rng(0), 20_000)
error = np.sqrt(accepted.mean() * (1 - accepted.mean()) / accepted.size)
print(f"rrs sampled 20,000 times: {accepted.mean():.4f} ± {error:.4f} accepted")
print(f"rrs exact acceptance:      {rrs.acceptance(inst):.4f}")
