"""The decoder's call: a batch of full-vocabulary rows in, one verified token per row out.

`otlp.verify_drafts` takes target and draft rows over the whole vocabulary (float32 or float64)
and the drafted token ids, restricts the draft to its top-k tokens, and samples each row's token
from the optimal transport (for i.i.d. drafts, by default, partial resolution's exact plan;
`method="global_resolution"` trades exactness for a tau and a time budget, with a report per
row). Over many rows the share of accepted drafts approaches α*. See the guide page "Decoding".
"""

import numpy as np

import otlp
from otlp.instances import zipf_llm_pair

p, q = zipf_llm_pair(8_000, temperature=1.0, similarity=0.7, seed=5)
n, k, rows = 2, 100, 1_000
rng = np.random.default_rng(0)
inst = otlp.Instance(p, q, n=n, scheme="iid", top_k=k)
drafts = inst.sample_drafts(rng, rows)  # (rows, n) drafted token ids

P = np.broadcast_to(p.astype(np.float32), (rows, p.size))  # the same pair in every row
Q = np.broadcast_to(q.astype(np.float32), (rows, q.size))
out = otlp.verify_drafts(P, Q, drafts, top_k=k, rng=1)
error = np.sqrt(out.accepted.mean() * (1 - out.accepted.mean()) / rows)
print(f"{rows} rows: tokens {out.tokens.shape}, {out.accepted.mean():.4f} ± {error:.4f} accepted")
print(f"alpha* = {otlp.optimal_acceptance(inst).alpha_star:.4f}")
print(f"method: {out.method}")
gr = otlp.verify_drafts(P, Q, drafts, method="global_resolution", top_k=k, tau=1e-3, rng=1)
print(f"global resolution: {gr.accepted.mean():.4f} accepted, {gr.fallbacks} exact fallbacks")
