"""``otlp bench`` for a config with a ``[verification]`` table: the cost of verifying drafts at
a decoder's call, as ratios to a pass over the call's own inputs, in one run.

Measured (issue 24's goals; LM-like laws: softmax of N(0, 2.5^2) logits, the draft's logits
shrunk and perturbed; float32 inputs as a model hands them over):

* ``verify_tree`` per visited node at each vocabulary of ``tree_vocabs`` (B rows, K x L path
  trees, SpecHub 2 x L, block a chain of L) for every case of ``tree_cases``, beside the floor:
  one pass computing max(p - q, 0) over each (p, q) context row of a call, per row (timed
  after every case; the fastest of them all divides every case at that vocabulary);
* ``verify_chain`` per call (V, B, chains of L) in numpy and torch float32 beside one pass
  over the call's inputs (a sum over p and q);
* ``verify_drafts`` per token (B = 1) at each (k, n) of ``drafts_kn`` for every scheme beside
  ``maxflow_cs`` and the i.i.d. fused row (global resolution, ``scheme="iid"``);
* global resolution at tau = 1e-6 against 1e-3 per scheme (at the first (k, n));
* the object API at the first (k, n): ``Instance`` (top-k k) + ``solve(..., "global_resolution",
  check=False)`` + ``plan.slice(drafts)`` per token, beside ``maxflow_cs``'s decoder call;
* budget adherence: the largest overrun of a ``time_budget`` seen over the drafts' calls.

Every case runs once untimed first (numba compilation, imports); a timing is the fastest of
``repeats`` calls (the machine is shared: the fastest call is the one least disturbed), the
median beside it. BLAS and torch run on one thread.
"""

from __future__ import annotations

import json
import multiprocessing
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from otlp.bench.machine import describe_machine, machine_info

DEFAULT_TREE_CASES = (
    "sps",
    "rrs",
    "rrs_without_replacement:without_replacement",
    "spechub:spechub",
    "block",
    "kseq",
    "gbv",
    "global_resolution:iid:100",
    "global_resolution:without_replacement:100",
    "maxflow_cs:iid:20",
)
DEFAULT_CHAIN_CASES = ("sps", "rrs", "block", "kseq", "global_resolution:iid:100")
DRAFT_SCHEMES = ("iid", "without_replacement", "independent", "greedy")
_KEYS = {
    "tree_vocabs",
    "tree_rows",
    "tree_paths",
    "tree_depth",
    "tree_cases",
    "chain_vocab",
    "chain_rows",
    "chain_length",
    "chain_libraries",
    "chain_cases",
    "drafts_vocab",
    "drafts_kn",
    "drafts_tokens",
    "taus",
    "budgets",
    "repeats",
    "seed",
}


@dataclass(frozen=True)
class VerificationBench:
    """The ``[verification]`` table (see the module docstring); every key optional."""

    tree_vocabs: tuple[int, ...] = (49152, 128256)
    tree_rows: int = 4
    tree_paths: int = 4
    tree_depth: int = 4
    tree_cases: tuple[str, ...] = DEFAULT_TREE_CASES
    chain_vocab: int = 32000
    chain_rows: int = 8
    chain_length: int = 5
    chain_libraries: tuple[str, ...] = ("numpy", "torch")
    chain_cases: tuple[str, ...] = DEFAULT_CHAIN_CASES
    drafts_vocab: int = 32000
    drafts_kn: tuple[tuple[int, int], ...] = ((100, 2), (1000, 2))
    drafts_tokens: int = 3
    taus: tuple[float, float] = (1e-3, 1e-6)
    budgets: tuple[float, ...] = (0.005, 0.05)
    repeats: int = 5
    seed: int = 0


def load_verification(path: str | Path) -> VerificationBench | None:
    """The ``[verification]`` table of the TOML config at ``path``, or None without one (an
    ``otlp bench`` grid config)."""
    import tomllib

    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return None  # load_config reports it
    return verification_table(data)


def verification_table(data: Mapping[str, Any]) -> VerificationBench | None:
    """The config's ``[verification]`` table checked, or None when it has none."""
    raw = data.get("verification")
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ValueError("[verification]: expected a table")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise ValueError(f"[verification]: unknown key(s) {', '.join(unknown)}")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "drafts_kn":
            values[key] = tuple((int(k), int(n)) for k, n in value)
        elif isinstance(value, list):
            values[key] = tuple(value)
        else:
            values[key] = value
    return VerificationBench(**values)


def _laws(
    rng: np.random.Generator, shape: tuple[int, ...], vocab: int
) -> tuple[np.ndarray, np.ndarray]:
    logits = rng.standard_normal((*shape, vocab)) * 2.5
    draft_logits = 0.8 * logits + 0.6 * rng.standard_normal((*shape, vocab))
    return _softmax(logits).astype(np.float32), _softmax(draft_logits).astype(np.float32)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _case(text: str) -> tuple[str, str, int | None]:
    parts = text.split(":")
    method = parts[0]
    scheme = parts[1] if len(parts) > 1 else "iid"
    top_k = int(parts[2]) if len(parts) > 2 else None
    return method, scheme, top_k


def _fastest(work: Callable[[], Any], repeats: int) -> tuple[float, float, list[Any]]:
    """(fastest, median) seconds of ``repeats`` calls and their results."""
    times, results = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        results.append(work())
        times.append(time.perf_counter() - start)
    return min(times), float(np.median(times)), results


def tree_rows(bench: VerificationBench, vocab: int) -> list[dict[str, Any]]:
    """verify_tree per visited node at ``vocab`` for every tree case, beside the floor."""
    from otlp.decoding import chain, children, path_tree, sample_children, verify_tree
    from otlp.verification.rule_table import RULES

    rng = np.random.default_rng(bench.seed)
    out: list[dict[str, Any]] = []
    for text in bench.tree_cases:
        method, scheme, top_k = _case(text)
        rule = RULES[method]
        paths = 1 if rule.max_paths == 1 else 2 if scheme == "spechub" else bench.tree_paths
        depth = bench.tree_depth
        parents = chain(depth) if paths == 1 else path_tree(paths, depth)
        p, q = _laws(rng, (bench.tree_rows, parents.shape[0] + 1), vocab)
        tokens = np.empty((bench.tree_rows, parents.shape[0]), dtype=np.int64)
        prefixes: list[list[tuple[int, ...]]] = [[] for _ in range(bench.tree_rows)]
        for context, kids in enumerate(children(parents)):
            if context:  # a model gives equal prefixes equal laws (the walk merges them)
                _share_laws(p, q, tokens, parents, prefixes, context - 1)
            if kids.shape[0]:
                kind = scheme if kids.shape[0] > 1 else "iid"
                tokens[:, kids] = sample_children(
                    q[:, context], kids.shape[0], kind, rng, top_k=top_k
                )
        seeds = iter(range(bench.repeats + 1))
        call = partial(
            _next_seed,
            verify_tree,
            seeds,
            tokens,
            parents,
            p,
            q,
            method=method,
            scheme=scheme,
            top_k=top_k,
        )
        call()  # warm-up
        per_node = []
        fastest, median, results = _fastest(call, bench.repeats)
        for result in results:
            per_node.append(int(result.num_accepted.sum()) + bench.tree_rows)
        visited = float(np.mean(per_node))
        floor = _floor_per_row(p, q, bench.repeats)
        shape = "chain" if paths == 1 else f"{paths} x {depth}"
        out.append(
            {
                "part": "tree",
                "vocab": vocab,
                "case": _label(method, scheme, top_k),
                "tree": shape,
                "us_per_node": 1e6 * fastest / visited,
                "us_per_node_median": 1e6 * median / visited,
                "floor_us": 1e6 * floor,
                "ratio": fastest / visited / floor,
            }
        )
    floor = min(row["floor_us"] for row in out)  # the least disturbed pass of the run
    for row in out:
        row["floor_us"] = floor
        row["ratio"] = row["us_per_node"] / floor
    return out


def _share_laws(
    p: np.ndarray,
    q: np.ndarray,
    tokens: np.ndarray,
    parents: np.ndarray,
    prefixes: list[list[tuple[int, ...]]],
    node: int,
) -> None:
    """Give ``node`` the laws of the first earlier node with the same token prefix."""
    for b, seen in enumerate(prefixes):
        path, walk = [], node
        while walk >= 0:
            path.append(int(tokens[b, walk]))
            walk = int(parents[walk])
        key = tuple(path[::-1])
        if key in seen:
            first = seen.index(key)
            p[b, node + 1], q[b, node + 1] = p[b, first + 1], q[b, first + 1]
        seen.append(key)


def _next_seed(function: Callable[..., Any], seeds: Any, *args: Any, **options: Any) -> Any:
    return function(*args, rng=next(seeds), **options)


def _floor_per_row(p: np.ndarray, q: np.ndarray, repeats: int) -> float:
    """Seconds per context row of one pass computing max(p - q, 0) in the input dtype."""
    rows = [(p[b, c], q[b, c]) for b in range(p.shape[0]) for c in range(p.shape[1])]

    def one_pass() -> None:
        for a, b in rows:
            np.maximum(a - b, 0)

    return _fastest(one_pass, repeats)[0] / len(rows)


def _label(method: str, scheme: str, top_k: int | None) -> str:
    text = method if scheme in ("iid", method.removeprefix("rrs_")) else f"{method} ({scheme})"
    if method == "spechub" or method == "rrs_without_replacement":
        text = method
    elif method in ("global_resolution", "maxflow_cs") and scheme != "iid":
        text = f"{method} ({scheme})"
    return text + (f", top-{top_k}" if top_k else "")


def chain_rows(bench: VerificationBench) -> list[dict[str, Any]]:
    """verify_chain per call beside one pass over the call's inputs, numpy and torch."""
    from otlp.decoding import sample_children, verify_chain

    out = []
    rng = np.random.default_rng(bench.seed)
    shape = (bench.chain_rows, bench.chain_length + 1)
    p, q = _laws(rng, shape, bench.chain_vocab)
    top_ks = [k for k in (_case(text)[2] for text in bench.chain_cases) if k is not None]
    draft_k = min(top_ks) if top_ks else None  # drafts inside every case's top-k draft
    drafts = np.stack(
        [
            sample_children(q[:, i], 1, "iid", rng, top_k=draft_k)[:, 0]
            for i in range(bench.chain_length)
        ],
        axis=1,
    )
    for library in bench.chain_libraries:
        pl: Any = p
        ql: Any = q
        tl: Any = drafts
        if library == "torch":
            import torch

            pl, ql, tl = torch.from_numpy(p), torch.from_numpy(q), torch.from_numpy(drafts)
        _sums(pl, ql)  # warm-up (torch's first call)
        floor = _fastest(partial(_sums, pl, ql), bench.repeats)[0]
        for text in bench.chain_cases:
            method, _, top_k = _case(text)
            call = partial(verify_chain, tl, pl, ql, method=method, top_k=top_k, rng=1)
            call()  # warm-up
            fastest, median, _ = _fastest(call, bench.repeats)
            out.append(
                {
                    "part": "chain",
                    "library": library,
                    "case": _label(method, "iid", top_k),
                    "ms_per_call": 1e3 * fastest,
                    "ms_per_call_median": 1e3 * median,
                    "floor_ms": 1e3 * floor,
                    "ratio": fastest / floor,
                }
            )
    return out


def _sums(p: Any, q: Any) -> tuple[Any, Any]:
    return p.sum(), q.sum()


def _draft_inputs(
    rng: np.random.Generator, vocab: int, k: int, n: int, scheme: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One token's (p, q, drafts) for ``scheme``; q is (2, V) for independent drafts."""
    from otlp.decoding import sample_children

    p, q = _laws(rng, (1,), vocab)
    p, q = p[0].astype(np.float64), q[0].astype(np.float64)
    if scheme == "independent":
        second = q**0.7 / (q**0.7).sum()
        first = sample_children(q[None], 1, "iid", rng, top_k=k)[0]
        other = sample_children(second[None], 1, "iid", rng, top_k=k)[0]
        return p, np.stack([q, second]), np.concatenate([first, other])[None]
    if scheme == "greedy":
        order = np.argsort(-q)
        head = order[: n - 1]
        rest = order[n - 1 : k]
        pick = rng.choice(rest, p=q[rest] / q[rest].sum())
        return p, q, np.concatenate([head, [pick]])[None]
    return p, q, sample_children(q[None], n, scheme, rng, top_k=k)


def drafts_rows(bench: VerificationBench) -> list[dict[str, Any]]:
    """verify_drafts per token per scheme beside maxflow_cs and the i.i.d. fused row; tau
    1e-6 against 1e-3; the largest budget overrun."""
    from otlp import verify_drafts

    out = []
    rng = np.random.default_rng(bench.seed)
    for k, n in bench.drafts_kn:
        tokens = {
            s: [_draft_inputs(rng, bench.drafts_vocab, k, n, s) for _ in range(bench.drafts_tokens)]
            for s in DRAFT_SCHEMES
        }

        def per_token(
            scheme: str, method: str, k: int = k, tokens: Any = tokens, **options: Any
        ) -> float:
            total = 0.0
            for p, q, drafts in tokens[scheme]:
                call = partial(
                    verify_drafts,
                    p,
                    q,
                    drafts,
                    method=method,
                    scheme=scheme,
                    top_k=k,
                    rng=0,
                    **options,
                )
                call()  # warm-up
                total += _fastest(call, bench.repeats)[0]
            return float(total / len(tokens[scheme]))

        fused = per_token("iid", "global_resolution")
        for scheme in DRAFT_SCHEMES:
            gr = fused if scheme == "iid" else per_token(scheme, "global_resolution")
            exact = per_token(scheme, "maxflow_cs")
            row = {
                "part": "drafts",
                "k": k,
                "n": n,
                "scheme": scheme,
                "ms_global_resolution": 1e3 * gr,
                "ms_maxflow_cs": 1e3 * exact,
                "speedup_vs_maxflow": exact / gr,
                "vs_iid_fused": gr / fused,
            }
            if (k, n) == bench.drafts_kn[0]:
                loose, tight = (per_token(scheme, "global_resolution", tau=t) for t in bench.taus)
                row["tau_ratio"] = tight / loose
                if scheme != "greedy":  # the object API solves greedy drafts by max-flow only
                    objects = _object_api_per_token(tokens[scheme], scheme, n, k, bench)
                    row["ms_object_api"] = 1e3 * objects
            out.append(row)
    out.append(_budget_row(bench, rng))
    return out


def _object_api_per_token(
    tokens: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    scheme: str,
    n: int,
    k: int,
    bench: VerificationBench,
) -> float:
    """Seconds per token of the object API: build the instance, solve, slice the drafts."""
    from otlp import Instance, solve

    total = 0.0
    for p, q, drafts in tokens:

        def call(p: np.ndarray = p, q: np.ndarray = q, drafts: np.ndarray = drafts) -> Any:
            draft = list(q) if q.ndim == 2 else q
            plan = solve(Instance(p, draft, n, scheme, top_k=k), "global_resolution", check=False)
            return plan.slice(drafts[0])

        call()  # warm-up
        total += _fastest(call, bench.repeats)[0]
    return total / len(tokens)


def _budget_row(bench: VerificationBench, rng: np.random.Generator) -> dict[str, Any]:
    """The largest (wall - budget) / budget over global resolution's calls under each budget
    of ``budgets``, every scheme, at the largest (k, n)."""
    from otlp import verify_drafts

    k, n = max(bench.drafts_kn)
    worst = 0.0
    calls = 0
    for budget in bench.budgets:
        for scheme in DRAFT_SCHEMES:
            for _ in range(bench.drafts_tokens):
                p, q, drafts = _draft_inputs(rng, bench.drafts_vocab, k, n, scheme)
                start = time.perf_counter()
                verify_drafts(
                    p, q, drafts, method="global_resolution", scheme=scheme, top_k=k, rng=0,
                    tau=1e-6, time_budget=budget,
                )  # fmt: skip
                worst = max(worst, (time.perf_counter() - start - budget) / budget)
                calls += 1
    return {"part": "budget", "k": k, "n": n, "calls": calls, "largest_overrun": worst}


def run_verification(bench: VerificationBench, out: Path, command: str) -> str:
    """Run every part in one spawned process with BLAS pinned to one thread
    (:func:`otlp.bench.executor.pinned_blas`), write ``report.md`` and ``results.json``
    under ``out``; returns the report."""
    from otlp.bench.executor import pinned_blas

    context = multiprocessing.get_context("spawn")
    with pinned_blas(), ProcessPoolExecutor(1, mp_context=context) as pool:
        rows = pool.submit(measure_all, bench).result()
    report = render(bench, rows, command)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({"rows": rows}, indent=1))
    (out / "report.md").write_text(report)
    return report


def measure_all(bench: VerificationBench) -> list[dict[str, Any]]:
    """Every part's rows, in this process (torch on one thread)."""
    if "torch" in bench.chain_libraries:
        import torch

        torch.set_num_threads(1)
    rows: list[dict[str, Any]] = []
    for vocab in bench.tree_vocabs:
        rows += tree_rows(bench, vocab)
    rows += chain_rows(bench)
    rows += drafts_rows(bench)
    return rows


def render(bench: VerificationBench, rows: list[dict[str, Any]], command: str) -> str:
    """The report: one table per part, ratios beside the times."""
    lines = [
        "# Verification cost",
        "",
        f"    {command}",
        "",
        f"Machine: {describe_machine(machine_info())}. Fastest of {bench.repeats} calls (median "
        "beside it), numba warmed by one untimed call per case, BLAS and torch on one thread.",
        "",
        f"## verify_tree per visited node (B = {bench.tree_rows}, float32; floor: max(p - q, 0) "
        "over one context row)",
        "",
        "| V | method | tree | µs per node | median | floor µs | × floor |",
        "| ---: | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        if r["part"] == "tree":
            lines.append(
                f"| {r['vocab']:,} | `{r['case']}` | {r['tree']} | {r['us_per_node']:.0f} | "
                f"{r['us_per_node_median']:.0f} | {r['floor_us']:.1f} | {r['ratio']:.1f} |"
            )
    lines += [
        "",
        f"## verify_chain per call (V = {bench.chain_vocab:,}, B = {bench.chain_rows}, chains of "
        f"{bench.chain_length}, float32; floor: p.sum() + q.sum())",
        "",
        "| library | method | ms per call | median | floor ms | × floor |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        if r["part"] == "chain":
            lines.append(
                f"| {r['library']} | `{r['case']}` | {r['ms_per_call']:.2f} | "
                f"{r['ms_per_call_median']:.2f} | {r['floor_ms']:.2f} | {r['ratio']:.1f} |"
            )
    lines += [
        "",
        f"## verify_drafts per token (B = 1, V = {bench.drafts_vocab:,}, top-k = k; "
        f"{bench.drafts_tokens} tokens)",
        "",
        "| (k, n) | scheme | global resolution ms | maxflow_cs ms | × faster than maxflow_cs "
        "| ÷ i.i.d. fused row | τ 1e-6 ÷ τ 1e-3 |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        if r["part"] == "drafts":
            tau = f"{r['tau_ratio']:.2f}" if "tau_ratio" in r else "—"
            lines.append(
                f"| ({r['k']}, {r['n']}) | {r['scheme']} | {r['ms_global_resolution']:.2f} | "
                f"{r['ms_maxflow_cs']:.1f} | {r['speedup_vs_maxflow']:.1f} | "
                f"{r['vs_iid_fused']:.2f} | {tau} |"
            )
    objects = [r for r in rows if r["part"] == "drafts" and "ms_object_api" in r]
    if objects:
        lines += [
            "",
            "The object API per token at the first (k, n): `Instance(p, q, n, scheme, top_k=k)`, "
            '`solve(..., "global_resolution", check=False)`, `plan.slice(drafts)`:',
            "",
            "| (k, n) | scheme | object API ms | maxflow_cs ms | × faster than maxflow_cs |",
            "| --- | --- | ---: | ---: | ---: |",
        ]
        lines += [
            f"| ({r['k']}, {r['n']}) | {r['scheme']} | {r['ms_object_api']:.2f} | "
            f"{r['ms_maxflow_cs']:.1f} | {r['ms_maxflow_cs'] / r['ms_object_api']:.1f} |"
            for r in objects
        ]
    for r in rows:
        if r["part"] == "budget":
            lines += [
                "",
                f"Budget adherence (global resolution, τ = 1e-6, budgets "
                f"{', '.join(f'{b:g} s' for b in bench.budgets)}, every scheme, ({r['k']}, "
                f"{r['n']}), {r['calls']} calls): largest overrun "
                f"{100 * r['largest_overrun']:.0f}% of the budget.",
            ]
    return "\n".join(lines) + "\n"
