"""Estimating an inner product from small sketches ([Musco] part 1).

Each sketch method compresses a vector to m numbers; the inner product of two vectors is
estimated from their sketches. Averaged over many independent sketches every estimator is
unbiased; on skewed vectors such as next-token distributions the sampling sketches, which keep
the heavy coordinates, are the most accurate (the benchmark page measures this on SmolLM2
vectors). See the guide page "Inner-product sketching".
"""

import numpy as np

from otlp.instances import zipf_llm_pair
from otlp.sketch import METHODS, estimate_inner_products

p, q = zipf_llm_pair(1_000, temperature=0.5, similarity=0.7, seed=6)
exact = float(p @ q)
scale = float(np.linalg.norm(p) * np.linalg.norm(q))
print(f"<p, q> = {exact:.6f}; relative error |F - <p, q>| / (|p| |q|) at m = 32, 200 sketches:")
for method in METHODS:
    estimates = estimate_inner_products(method, p, q, 32, rng=0, copies=200)
    errors = np.abs(estimates - exact) / scale
    print(f"{method:<12} median {np.median(errors):.1e}, mean estimate {estimates.mean():.6f}")
