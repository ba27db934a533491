"""End-to-end decoder cells for ``otlp bench``: what a decoder pays per token.

A sweep's ``decoders = [...]`` times, for each token ([GR] §7.2: one suite item, omega drawn
from its top-k draft), the work from the item's full-vocabulary (p, q) arrays and the drafted
ids to the output token, side by side with the sweep's other cells:

* ``argpartition`` — floor: ``np.argpartition`` over V for the top k, nothing else;
* ``sps_numpy`` — floor: single-draft speculative sampling over V in numpy;
* a method of :func:`otlp.verify_drafts` (``global_resolution``, ``sps``, ``rrs``, ``kseq``,
  ``maxflow_cs``, and per draft scheme ``rrs_without_replacement``, ``spechub``): that call
  on the token (B = 1) with the cell's ``scheme``, top-k inside the clock (two independent
  drafts: the suite item's draft and the same draft at a higher temperature,
  :meth:`otlp.instances.suites.SuiteItem.draft`);
* ``NAME@B`` (e.g. ``global_resolution@64``): :func:`otlp.verify_drafts` on B rows (the
  token's pair repeated, drafts i.i.d. from its draft); the time per token is the batch
  time over B, shown as tokens/s in the throughput table; ``NAME@B:parallel`` passes
  ``parallel=True`` (numba's threads);
* any other ``otlp.solve`` method (e.g. ``highs``): ``Instance`` + ``solve`` + ``sample``, all
  inside the clock (the object API end to end);
* ``NAME:object`` (e.g. ``global_resolution:object``): the object API on a prebuilt
  ``Instance`` (built outside the clock): ``otlp.solve`` + ``plan.sample`` for the token.

``[methods.NAME]`` size caps and tau grids apply to decoder cells of the same NAME. This
module is the one definition of a decoder cell: its names, which ones run, its tau, the
timed work, its per-token record and its tables; :mod:`otlp.bench.cells` only places the
cells in the grid.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from otlp.bench.markdown import table_head, table_row
from otlp.bench.records import ERROR, NOT_APPLICABLE, OK, TOO_LARGE, token_record

DECODE = "decode"
FLOORS = ("argpartition", "sps_numpy")
BATCH_SEPARATOR = "@"
PARALLEL_SUFFIX = ":parallel"
OBJECT_SUFFIX = ":object"
REFERENCE = "global_resolution"  # the ratio table divides by this decoder's median


def split_name(name: str) -> tuple[str, int, bool]:
    """``"global_resolution@64:parallel"`` -> ("global_resolution", 64, True); no suffix ->
    batch 1, serial."""
    parallel = name.endswith(PARALLEL_SUFFIX)
    base, _, batch = name.removesuffix(PARALLEL_SUFFIX).partition(BATCH_SEPARATOR)
    base = base.removesuffix(OBJECT_SUFFIX)
    if not batch:
        return base, 1, parallel
    if not batch.isdigit() or int(batch) < 1:
        raise ValueError(f"decoders: batch size in {name!r} must be a positive integer")
    return base, int(batch), parallel


def _batched_methods() -> tuple[str, ...]:
    from otlp.verification.rule_table import POSITION_SCHEMES, position_names

    return tuple(dict.fromkeys(m for s in POSITION_SCHEMES for m in position_names(s)))


def known_decoders(names: Iterable[str], notes: dict[str, None]) -> list[str]:
    """The decoder names this installation can run; the others are noted and skipped."""
    from otlp.methods import method_names

    known = []
    for name in names:
        base, batch, parallel = split_name(name)
        usable = (base in _batched_methods() and (base == "global_resolution" or not parallel)) or (
            batch == 1 and not parallel and (base in FLOORS or base in method_names())
        )
        if usable:
            known.append(name)
        else:
            notes[f"decoder {name!r} is unknown (or cannot be batched); skipped"] = None
    return known


def takes_tau(name: str) -> bool:
    return split_name(name)[0] == "global_resolution"


def _sps_numpy(p: np.ndarray, q: np.ndarray, draft: int, rng: np.random.Generator) -> int:
    if rng.random() * q[draft] < p[draft]:
        return draft
    left = np.maximum(p - q, 0.0)
    return int(np.searchsorted(np.cumsum(left), rng.random() * left.sum(), side="right"))


def _work(cell: Any, item: Any, omega: np.ndarray) -> Callable[[], Any]:
    """The timed call for ``cell`` on one token (inputs prepared outside the clock)."""
    import otlp

    base, batch, parallel = split_name(cell.name)
    extra = {"parallel": True} if parallel else {}
    rng = np.random.default_rng([cell.seed, int(omega[0])])
    k, n, scheme = cell.k, cell.n, cell.scheme
    p, q = np.asarray(item.p), np.asarray(item.draft(scheme))
    tau = {} if cell.tau is None else {"tau": cell.tau}
    if base == "argpartition":
        first = q if q.ndim == 1 else q[0]
        return lambda: np.argpartition(first, -k)[-k:]
    if base == "sps_numpy":
        return lambda: _sps_numpy(p, q, int(omega[0]), rng)
    if cell.name.endswith(OBJECT_SUFFIX):
        inst = otlp.Instance(p, q, n, top_k=k)  # prebuilt: outside the clock
        return lambda: otlp.solve(inst, base, check=False, **tau, **dict(cell.options)).sample(
            omega, rng
        )
    if base in _batched_methods():
        if batch == 1:
            rows_p, rows_q, drafts = p, q, omega[None, :]
        else:
            rows_p, rows_q = np.tile(p, (batch, 1)), np.tile(q, (batch,) + (1,) * q.ndim)
            drafts = otlp.Instance(p, q, n, scheme, top_k=k).sample_drafts(rng, batch)
        return lambda: otlp.verify_drafts(
            rows_p, rows_q, drafts, method=base, top_k=k, rng=rng, scheme=scheme, **tau, **extra
        )

    def object_api() -> Any:
        inst = otlp.Instance(p, q, n, scheme, top_k=k)
        plan = otlp.solve(inst, base, check=False, **tau, **dict(cell.options))
        return plan.sample(omega, rng)

    return object_api


def measure_decode(cell: Any, token: Any) -> dict[str, Any]:
    """One token's record for a decoder cell: the fastest of ``cell.repeats`` calls, per token.

    A method that does not take the cell's scheme (a ``ValueError`` naming an argument) is
    "n/a" for that token."""
    from otlp.errors import ProblemTooLarge

    batch = split_name(cell.name)[1]
    best, result = np.inf, None
    where = (token.index, token.item, token.omega)
    try:
        work = _work(cell, token.item, np.asarray(token.omega, dtype=np.int64))
        for _ in range(cell.repeats):
            start = time.perf_counter()
            result = work()
            best = min(best, time.perf_counter() - start)
    except ProblemTooLarge as exc:
        return token_record(*where, TOO_LARGE, message=str(exc))
    except ValueError as exc:
        return token_record(*where, NOT_APPLICABLE, message=f"ValueError: {exc}")
    except Exception as exc:  # a crashing decoder is a recorded error, not a dead sweep
        return token_record(*where, ERROR, message=f"{type(exc).__name__}: {exc}")
    fallbacks = getattr(result, "fallbacks", None)
    return token_record(
        *where,
        OK,
        time_s=float(best) / batch,
        acceptance=_accepted(result, token.omega),
        fallback=None if fallbacks is None else bool(fallbacks > 0),
    )


def _accepted(result: Any, omega: list[int]) -> float:
    """The share of output tokens that were one of their drafts (NaN for the top-k floor)."""
    accepted = getattr(result, "accepted", None)
    if accepted is not None:
        return float(np.mean(accepted))
    if np.ndim(result) == 0:
        return float(int(result) in omega)
    return float("nan")


def decode_tables(piece: Any) -> list[str]:
    """Per-token ms end to end (median, p90) with ratios to global resolution, and the
    batched decoders' throughput."""
    rows = piece.lookup(DECODE)
    labels = piece.labels(DECODE)
    single = [label for label in labels if BATCH_SEPARATOR not in label]
    batched = [label for label in labels if BATCH_SEPARATOR in label]
    tokens = max((row.get("tokens", 0) for row in piece.of_kind(DECODE)), default=0)
    lines = [
        f"**End to end per token** from full-vocabulary (p, q) arrays and drafted ids to the "
        f"output token, ms over {tokens} tokens: median (p90) and, in brackets, the ratio to "
        "global resolution's median; `argpartition` and `sps_numpy` are floors.",
        "",
        *table_head(["(k, n)", *single]),
    ]
    for k, n in piece.points(DECODE):
        reference = _reference(rows, k, n, single)
        cells = []
        for label in single:
            row = rows.get((k, n, label))
            cells.append(_time_text(row, reference))
        lines.append(table_row([f"({k}, {n})", *cells]))
    if batched:
        lines += [
            "",
            "**Batched throughput** (`otlp.verify_drafts` on B rows, tokens/s, median token).",
            "",
            *table_head(["(k, n)", *batched]),
        ]
        for k, n in piece.points(DECODE):
            texts = []
            for label in batched:
                row = rows.get((k, n, label))
                ms = None if row is None else row.get("time_median_ms")
                texts.append("—" if not ms else f"{1e3 / ms:,.0f}")
            lines.append(table_row([f"({k}, {n})", *texts]))
    return lines


def _reference(rows: dict, k: int, n: int, labels: list[str]) -> float | None:
    for label in labels:
        if label.split(" ")[0] == REFERENCE:
            row = rows.get((k, n, label))
            if row is not None and row.get("time_median_ms"):
                return float(row["time_median_ms"])
    return None


def _time_text(row: dict | None, reference: float | None) -> str:
    if row is None or row.get("time_median_ms") is None:  # not run, or over its size cap
        return "—"
    median, p90 = row["time_median_ms"], row["time_p90_ms"]
    text = f"{median:.3g} ({p90:.3g})"
    if row["fallbacks"]:
        text += f" {row['fallbacks']} fallbacks"
    if reference:
        text += f" [{median / reference:.3g}×]"
    return text
