"""Global resolution for i.i.d., without-replacement and two independent drafts ([GR] App. S).

Per-token times in the layout of [GR] Table 1, for the three draft schemes side by side on
the same tokens. A token is one (p, q) pair of a suite with omega drawn from its draft
scheme; the instance is built untimed (alike for all methods), then ``otlp.solve(...,
check=False)`` plus the slice for omega is timed — what a decoder pays per token for a fresh
(p, q). ``maxflow_cs`` (H*, then the outer and inner networks, OR-Tools) is timed on the
same tokens (the first ``--baseline`` tokens of a cell). Success = no unit fell back to
max-flow; "certified" = the token report's certified deviation is within the unit's budget
(5 tau) — every token; "verified" = ``otlp.verify`` on the materialised plan (untimed) is
within 15 tau / 10 tau, on the first ``--verify`` tokens of a cell.

Suites: Zipf-like pairs (V = 32k, similarity 0.5/0.7/0.9) and SmolLM2-135M at temperature 1
(i.i.d. and without replacement: draft skip4; independent: drafts skip2 and skip4 of the same
prompt and position, over the union of their top-1000 tokens). A second table gives mean
alpha* without replacement minus alpha* i.i.d. by (k, n).

Numba kernels are compiled (or loaded from the cache) before timing; BLAS pinned to 1 thread.

    python benchmarks/bench_schemes.py --tokens 30 --baseline 5 --verify 10
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import otlp  # noqa: E402
from otlp.instances import zipf_llm_pair  # noqa: E402

GRID = ((10, 2), (10, 3), (10, 4), (10, 5), (100, 2), (100, 3), (1000, 2))
SCHEMES = ("iid", "without_replacement", "independent")
TAUS = (1e-3, 1e-4)
ALPHA_KS = (10, 30, 100, 300, 1000)
ALPHA_NS = (2, 3, 4, 6, 8)
Token = tuple[str, np.ndarray, np.ndarray, np.ndarray]  # name, p, q, second draft


def zipf_tokens(count: int) -> Iterator[Token]:
    """Zipf-like pairs (similarity 0.5/0.7/0.9); the second draft of the independent scheme
    mixes the same target and noise logits with similarity 0.2 lower."""
    for i in range(count):
        similarity = (0.5, 0.7, 0.9)[i % 3]
        p, q = zipf_llm_pair(32_000, similarity=similarity, seed=i)
        _, q2 = zipf_llm_pair(32_000, similarity=similarity - 0.2, seed=i)  # same target
        yield f"zipf-{i}", p, q, q2


def smollm2_tokens(count: int) -> Iterator[Token]:
    """SmolLM2 at temperature 1: skip4 draft, and skip2 as the second independent draft."""
    with np.load(ROOT / "instances" / "data" / "smollm2.npz", allow_pickle=False) as z:
        ids, q_top, p_top = z["ids"], z["q_top"].astype(float), z["p_top"].astype(float)
        draft, temp = z["draft"], z["temperature"]
        prompt, position = z["prompt_id"], z["position"]
    rows = [i for i in range(len(draft)) if draft[i] == "skip4" and temp[i] == 1.0]
    partner = {
        (prompt[i], position[i]): i
        for i in range(len(draft))
        if draft[i] == "skip2" and temp[i] == 1.0
    }
    for i in [rows[j] for j in np.linspace(0, len(rows) - 1, min(count, len(rows))).astype(int)]:
        j = partner[(prompt[i], position[i])]
        vocab = np.union1d(ids[i], ids[j])
        p = np.zeros(vocab.size + 1)
        q = np.zeros(vocab.size + 1)
        q2 = np.zeros(vocab.size + 1)
        p[np.searchsorted(vocab, ids[j])] = p_top[j]
        p[np.searchsorted(vocab, ids[i])] = p_top[i]
        p[-1] = max(1.0 - p[:-1].sum(), 0.0)
        q[np.searchsorted(vocab, ids[i])] = q_top[i]
        q2[np.searchsorted(vocab, ids[j])] = q_top[j]
        yield f"smollm2-{i}", p / p.sum(), q / q.sum(), q2 / q2.sum()


SUITES = {"zipf": zipf_tokens, "smollm2": smollm2_tokens}


def instance(token: Token, scheme: str, k: int, n: int) -> otlp.Instance:
    _, p, q, q2 = token
    if scheme == "independent":
        return otlp.Instance(p, [q, q2], n, scheme, top_k=k)
    return otlp.Instance(p, q, n, scheme, top_k=k)


def timed(token: Token, scheme: str, k: int, n: int, omega: np.ndarray, **kw: Any) -> tuple:
    inst = instance(token, scheme, k, n)
    start = time.perf_counter()
    if "tau" in kw:
        plan = otlp.solve(inst, "global_resolution", check=False, **kw)
        _, report = plan.token_report(omega)
        return 1e3 * (time.perf_counter() - start), plan, report
    plan = otlp.solve(inst, "maxflow-cs", check=False)  # maxflow_cs once aliases land
    plan.local_slice(omega)
    return 1e3 * (time.perf_counter() - start), plan, None


def run_cell(suite: str, scheme: str, k: int, n: int, args: argparse.Namespace) -> dict:
    rows: dict[str, Any] = {"gr": {tau: [] for tau in TAUS}, "maxflow_cs": []}
    for index, token in enumerate(SUITES[suite](args.tokens)):
        if scheme == "independent" and n != 2:
            return {}
        inst = instance(token, scheme, k, n)
        omega = inst.sample_drafts(np.random.default_rng(index), 1)[0]
        for tau in TAUS:
            ms, plan, report = timed(token, scheme, k, n, omega, tau=tau)
            budget = 5 * tau
            row = {
                "ms": ms,
                "success": not report.fallback,
                "certified": report.fallback or report.deviation <= budget,
            }
            if index < args.verify:
                check = otlp.verify(plan)
                row.update(
                    target_l1=check.target_l1,
                    gap=check.acceptance_gap,
                    within=check.ok,
                )
            rows["gr"][tau].append(row)
        if index < args.baseline:
            rows["maxflow_cs"].append(timed(token, scheme, k, n, omega)[0])
    return rows


def warm_up() -> None:
    p, q = zipf_llm_pair(300, seed=99)
    for scheme in SCHEMES:
        for n in (2, 3):
            if scheme == "independent" and n != 2:
                continue
            inst = otlp.Instance(p, [q, p] if scheme == "independent" else q, n, scheme, top_k=30)
            for tau in TAUS:
                plan = otlp.solve(inst, "global_resolution", tau=tau)
                plan.token_report(inst.sample_drafts(np.random.default_rng(0), 1)[0])


def _ms(values: list[float]) -> str:
    if not values:
        return "—"
    med = float(np.median(values))
    return f"{med:.2f} ({np.percentile(values, 90):.2f})" if med < 100 else f"{med:.0f}"


def table(results: dict, suite: str) -> str:
    head = (
        "| (k, n) | scheme | maxflow_cs | GR τ=1e-3 | GR τ=1e-4 | speed-up (1e-3) "
        "| worst L1/15τ, gap/10τ |"
    )
    lines = [head, "|" + "---|" * 7]
    for (k, n), by_scheme in results[suite].items():
        for scheme, cell in by_scheme.items():
            if not cell:
                continue
            gr_cells, worst = [], []
            for tau in TAUS:
                rows = cell["gr"][tau]
                success = np.mean([r["success"] for r in rows])
                gr_cells.append(f"{_ms([r['ms'] for r in rows])} · {100 * success:.0f}%")
                checked = [r for r in rows if "target_l1" in r]
                if checked:
                    l1 = max(r["target_l1"] for r in checked) / (15 * tau)
                    gap = max(abs(r["gap"]) for r in checked) / (10 * tau)
                    worst.append(f"{l1:.2f}/{gap:.2f}")
            base = cell["maxflow_cs"]
            gr_med = np.median([r["ms"] for r in cell["gr"][TAUS[0]]])
            ratio = f"{np.median(base) / gr_med:.1f}×" if base else "—"
            lines.append(
                f"| ({k}, {n}) | {scheme} | {_ms(base)} | {gr_cells[0]} | {gr_cells[1]} | "
                f"{ratio} | {' · '.join(worst)} |"
            )
    return "\n".join(lines)


def alpha_gap_table(count: int) -> str:
    """Mean alpha* without replacement minus alpha* i.i.d., by (k, n), per suite."""
    out = []
    for suite, tokens in SUITES.items():
        gaps = np.zeros((len(ALPHA_NS), len(ALPHA_KS)))
        items = list(tokens(count))
        for a, n in enumerate(ALPHA_NS):
            for b, k in enumerate(ALPHA_KS):
                diffs = [
                    otlp.optimal_acceptance(instance(t, "without_replacement", k, n)).alpha_star
                    - otlp.optimal_acceptance(instance(t, "iid", k, n)).alpha_star
                    for t in items
                ]
                gaps[a, b] = np.mean(diffs)
        lines = [f"| {suite}: n \\ k | " + " | ".join(map(str, ALPHA_KS)) + " |"]
        lines.append("|" + "---|" * (len(ALPHA_KS) + 1))
        for a, n in enumerate(ALPHA_NS):
            lines.append(f"| {n} | " + " | ".join(f"{100 * g:+.2f}" for g in gaps[a]) + " |")
        out.append("\n".join(lines))
    return "\n\n".join(out)


def alpha_timing(tokens: int = 10, calls: int = 5) -> str:
    """Median time of alpha* without replacement at (k, n) = (1000, 8), warmed up."""
    lines = []
    for suite, make in SUITES.items():
        times = []
        for token in make(tokens):
            inst = instance(token, "without_replacement", 1000, 8)
            otlp.optimal_acceptance(inst)
            for _ in range(calls):
                start = time.perf_counter()
                otlp.optimal_acceptance(inst)
                times.append(1e3 * (time.perf_counter() - start))
        lines.append(
            f"alpha* without replacement at (1000, 8), {suite}: median {np.median(times):.2f} ms "
            f"(p90 {np.percentile(times, 90):.2f}) over {len(times)} calls"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=30)
    parser.add_argument("--baseline", type=int, default=5, help="maxflow_cs tokens per cell")
    parser.add_argument("--verify", type=int, default=10, help="verified tokens per cell")
    parser.add_argument("--alpha-tokens", type=int, default=30)
    parser.add_argument("--suites", default="zipf,smollm2")
    parser.add_argument("--out", type=Path, default=ROOT / "otlp-results")
    parser.add_argument("--alpha-timing-only", action="store_true", help="time alpha* only")
    args = parser.parse_args()
    if args.alpha_timing_only:
        print(alpha_timing())
        return
    args.out.mkdir(parents=True, exist_ok=True)
    warm_up()
    start = time.perf_counter()
    results: dict[str, dict] = {}
    for suite in args.suites.split(","):
        results[suite] = {}
        for k, n in GRID:
            results[suite][(k, n)] = {s: run_cell(suite, s, k, n, args) for s in SCHEMES}
            print(f"{suite} ({k}, {n}) done at {time.perf_counter() - start:.0f} s", flush=True)
    parts = ["# Global resolution by draft scheme ([GR] Table 1 layout)", ""]
    parts.append(
        "Median (p90) ms per token; `· x%` = success without fallback; speed-up = maxflow_cs "
        "median / GR median at τ = 1e-3; last column: worst verified target L1 / 15τ and "
        "|acceptance gap| / 10τ at τ = 1e-3 · 1e-4."
    )
    for suite in results:
        parts += ["", f"## {suite}", "", table(results, suite)]
    parts += ["", "## alpha* without replacement − alpha* i.i.d. (percentage points)", ""]
    parts.append(alpha_gap_table(args.alpha_tokens))
    parts += ["", f"Total {time.perf_counter() - start:.0f} s. Command: `{' '.join(sys.argv)}`"]
    (args.out / "schemes.md").write_text("\n".join(parts) + "\n")
    serial = {
        suite: {f"{k},{n}": cell for (k, n), cell in by_point.items()}
        for suite, by_point in results.items()
    }
    (args.out / "schemes.json").write_text(json.dumps(serial, default=str))
    print("\n".join(parts))


if __name__ == "__main__":
    main()
