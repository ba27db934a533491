"""Multi-step verification: block efficiency of L-token drafts from K paths, exactly.

On a small Markov model pair the expected number of tokens per target call is computed by
enumeration for token-wise speculative sampling, block verification, greedy multi-path block
verification (GBV) and SpecTr traversal with an optimal-transport rule, next to the optimum of
[GBV]'s antichain LP. See the guide page "Multi-step verification".
"""

from otlp.multistep import expected_accepted, model_pair, multi_path_lp, single_path_lp

target, draft = model_pair("markov", 4, seed=0)
L = 3
print(f"block length L = {L}")
print(f"token (K=1)     {expected_accepted(target, draft, L, 'token') + 1:.4f}")
print(f"block (K=1)     {expected_accepted(target, draft, L, 'block') + 1:.4f}")
print(f"LP optimum K=1  {single_path_lp(target, draft, L).block_efficiency:.4f}")
for K in (2, 3):
    gbv = expected_accepted(target, draft, L, "gbv", paths=K) + 1
    spectr = expected_accepted(target, draft, L, "spectr", paths=K, rule="ot") + 1
    lp = multi_path_lp(target, draft, L, paths=K).block_efficiency
    print(f"K={K}: gbv {gbv:.4f}, spectr:ot {spectr:.4f}, LP optimum {lp:.4f}")
