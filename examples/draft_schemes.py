"""How the draft scheme moves the optimal acceptance α*.

Drafting n tokens i.i.d. can repeat a token; drafting without replacement cannot, and the greedy
scheme ([GR] Appendix O) drafts the top n − 1 draft tokens and samples the last one. α* has a
fast form for each (prefix search, a certified quadrature, a closed form). Greedy drafting jumps
ahead once its fixed tokens include one where the target puts much of its mass (here the draft's
third token). See the guide page "Instances, draft schemes and suites".
"""

import numpy as np

import otlp
from otlp.instances import zipf_llm_pair

p, q = zipf_llm_pair(5_000, temperature=0.7, similarity=0.6, seed=2)
print("n   iid       without_replacement  greedy")
for n in (1, 2, 3, 4):
    row = [
        otlp.optimal_acceptance(otlp.Instance(p, q, n=n, scheme=scheme, top_k=30)).alpha_star
        for scheme in ("iid", "without_replacement", "greedy")
    ]
    print(f"{n}   {row[0]:.6f}  {row[1]:.6f}             {row[2]:.6f}")

top = np.argsort(-q)[:3]
print(f"target mass on the draft's top 3 tokens: {np.round(p[top], 3).tolist()}")
