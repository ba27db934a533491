"""The Markdown report: [GR] §7-style tables per (suite, scheme), with the machine named.

* Table 1 — per-token time (ms, median and p90) per method and (k, n), with success rates.
* Table 2 — best acceptance under per-token time limits (default 10 and 100 ms).
* alpha* against k and n (the data of [GR] Figure 1); rules' acceptance beside alpha*.
* Verification — every plan went through ``otlp.verify``; deviations and failures.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from otlp.bench.cells import METHOD, RULE
from otlp.bench.decoder_cells import DECODE, decode_tables
from otlp.bench.machine import describe_machine
from otlp.bench.markdown import table_head, table_row
from otlp.bench.tables import Row, Slice, best_under_limit, measured

CAPPED = "—"
MAX_LISTED_FAILURES = 5


def render_report(
    pieces: Sequence[Slice],
    *,
    machine: Mapping[str, Any],
    run: Mapping[str, Any],
    suites: Mapping[str, Mapping[str, Any]],
    notes: Sequence[str],
    figures: Mapping[str, Sequence[tuple[str, str]]],
    time_limits_ms: Sequence[float],
) -> str:
    """The whole report; ``figures`` maps a slice key to (caption, file) pairs."""
    lines = [
        "# otlp bench report",
        "",
        f"Command: `{run['command']}` (config `{run['config']}`), {run['started']}.",
        "",
        f"- Machine: {describe_machine(dict(machine))}.",
        f"- Executor: {run['executor']}; BLAS pinned to 1 thread in every worker.",
        f"- Wall time of this run: {run['wall_s']:.1f} s ({run['cells_run']} cells measured now, "
        f"{run['cells_reused']} reused from the results file).",
        "- Timing: per token (one suite item with omega drawn from the draft, [GR] §7.2), "
        "the fastest of the configured repeats of `otlp.solve` plus the slice pi(.|omega) on a "
        "fresh instance; verification is not timed. Methods are measured side by side on each "
        "token in the same worker. Each method was warmed up on a small instance of the same "
        "suite first, so numba compilation and first imports are excluded. Tables give the "
        "median and p90 over tokens; Table 2 uses the mean, as [GR] does.",
        "- Every plan went through `otlp.verify`; a failed verification counts as a failure and "
        "never enters an acceptance average.",
        f"- `{CAPPED}`: not run, the (k, n) problem has more draft columns than the method's "
        "`max_columns` cap in the config.",
    ]
    if len(run["runs"]) > 1:
        lines.append(
            f"- Note: the cells come from {len(run['runs'])} runs ({', '.join(run['runs'])}); "
            "timings from different runs are not side by side (`--fresh` measures all anew)."
        )
    lines += [f"- Note: {note}." for note in notes]
    for piece in pieces:
        lines += ["", *_slice_section(piece, suites, figures.get(piece.key, ()), time_limits_ms)]
    return "\n".join(lines) + "\n"


def _slice_section(
    piece: Slice,
    suites: Mapping[str, Mapping[str, Any]],
    figures: Sequence[tuple[str, str]],
    time_limits_ms: Sequence[float],
) -> list[str]:
    suite = suites.get(piece.suite, {})
    chosen = f" with {piece.select}" if piece.select else ""
    lines = [
        f"## Suite `{piece.suite}`{chosen}, {piece.scheme} drafts",
        "",
        f"{suite.get('description', '')}. Of its {suite.get('size', '?')} items, each cell "
        f"takes its tokens evenly spread over those{chosen}; every table says how many.",
    ]
    if piece.of_kind(METHOD):
        lines += ["", *time_table(piece), "", *best_acceptance_table(piece, time_limits_ms)]
    lines += ["", *alpha_table(piece)]
    if piece.of_kind(RULE):
        lines += ["", *rules_table(piece)]
    if piece.of_kind(DECODE):
        lines += ["", *decode_tables(piece)]
    if piece.of_kind(METHOD):
        lines += ["", *verification_table(piece)]
    for caption, path in figures:
        lines += ["", f"![{caption}]({path})"]
    return lines


def time_table(piece: Slice) -> list[str]:
    """[GR] Table 1: ms/token per method per (k, n)."""
    labels = piece.labels(METHOD)
    cells = piece.lookup(METHOD)
    tokens = max((r["tokens"] for r in piece.of_kind(METHOD) if measured(r)), default=0)
    lines = [
        f"**Table 1.** Per-token time in ms over {tokens} tokens, median (p90); the percentage "
        "is the share of tokens verified without fallback, shown where below 100% or the "
        "method can fall back.",
        "",
        *table_head(["(k, n)", *labels]),
    ]
    for k, n in piece.points(METHOD):
        lines.append(
            table_row([f"({k}, {n})", *(_time_cell(cells.get((k, n, x))) for x in labels)])
        )
    return lines


def best_acceptance_table(piece: Slice, time_limits_ms: Sequence[float]) -> list[str]:
    """[GR] Table 2: best acceptance per method under each per-token time limit."""
    labels = piece.labels(METHOD)
    lines = [
        "**Table 2.** Best mean acceptance over the (k, n) cells whose mean per-token time is "
        "within the limit and whose every token verified; the cell is in brackets.",
        "",
        *table_head(["limit (ms/token)", *labels]),
    ]
    for limit in time_limits_ms:
        best = best_under_limit(piece, limit)
        texts = [
            CAPPED if row is None else f"{_pct(row['acceptance_mean'])} ({row['k']}, {row['n']})"
            for row in (best[label] for label in labels)
        ]
        lines.append(table_row([f"{limit:g}", *texts]))
    return lines


def alpha_table(piece: Slice) -> list[str]:
    """Mean optimal acceptance alpha* by n (rows) and k (columns): [GR] Figure 1's data."""
    alpha = piece.alpha_star()
    ks = sorted({k for k, _ in alpha})
    ns = sorted({n for _, n in alpha})
    lines = [
        f"**Optimal acceptance** alpha* (mean over {piece.alpha_tokens()} tokens) by number of "
        "drafts n and top-k.",
        "",
        *table_head(["n \\ k", *map(str, ks)]),
    ]
    for n in ns:
        lines.append(table_row([str(n), *(_pct(alpha.get((k, n))) for k in ks)]))
    return lines


def rules_table(piece: Slice) -> list[str]:
    """Each rule's exact acceptance (mean over tokens) beside alpha*."""
    labels = piece.labels(RULE)
    cells = piece.lookup(RULE)
    alpha = piece.alpha_beside(RULE)
    tokens = max((r["tokens"] for r in piece.of_kind(RULE) if measured(r)), default=0)
    lines = [
        f"**Verification rules.** Exact acceptance (mean over {tokens} tokens) beside alpha* of "
        "the i.i.d. draft on the same tokens; n/a where a rule does not apply to (k, n). Rules "
        "with their own draft joint (without replacement, SpecHub) can exceed the i.i.d. "
        "alpha*, and mentored decoding is lossy.",
        "",
        *table_head(["(k, n)", "alpha*", *labels]),
    ]
    for k, n in piece.points(RULE):
        texts = [_acceptance_cell(cells.get((k, n, label))) for label in labels]
        lines.append(table_row([f"({k}, {n})", _pct(alpha.get((k, n))), *texts]))
    return lines


def verification_table(piece: Slice) -> list[str]:
    """Per method over all its cells: verified tokens and the largest deviations."""
    lines = [
        "**Verification.** Tokens verified (with fallback), largest target-marginal L1 error, "
        "largest |alpha* - acceptance| and most negative plan entry over all cells.",
        "",
        *table_head(
            ["method", "tokens", "verified", "fallbacks", "max L1", "max gap", "min entry"]
        ),
    ]
    failures: list[str] = []
    for label in piece.labels(METHOD):
        rows = [r for r in piece.of_kind(METHOD) if r["label"] == label and measured(r)]
        if not rows:
            continue
        lines.append(
            table_row(
                [
                    label,
                    str(sum(r["tokens"] for r in rows)),
                    str(sum(r["verified"] for r in rows)),
                    str(sum(r["fallbacks"] for r in rows)),
                    _sci(_extreme(rows, "max_target_l1", max)),
                    _sci(_extreme(rows, "max_abs_gap", max)),
                    _sci(_extreme(rows, "min_entry", min)),
                ]
            )
        )
        failures += [
            f"- {label} at (k, n) = ({r['k']}, {r['n']}): {r['failed']} failed, "
            f"{r['unmeasured']} not measured ({r['status']})"
            for r in rows
            if r["failed"] or r["unmeasured"]
        ]
    if failures:
        lines += ["", "Cells with failures or errors:", *failures[:MAX_LISTED_FAILURES]]
        if len(failures) > MAX_LISTED_FAILURES:
            lines.append(f"- ... and {len(failures) - MAX_LISTED_FAILURES} more (see results.csv)")
    return lines


# ----- formatting --------------------------------------------------------------------------
def _cell(row: Row | None, key: str, text: Callable[[Row], str]) -> str:
    """A table cell: ``text(row)``, or CAPPED where the cell did not run, or the row's status
    where it ran without a ``key`` value."""
    if row is None or not measured(row):
        return CAPPED
    if row[key] is None:
        return row["status"]
    return text(row)


def _time_cell(row: Row | None) -> str:
    return _cell(row, "time_median_ms", _time_text)


def _time_text(row: Row) -> str:
    text = f"{_ms(row['time_median_ms'])} ({_ms(row['time_p90_ms'])})"
    if row["success_rate"] < 1 or row["tau"] is not None:
        text += f" · {_pct(row['success_rate'], 0)}"
    if row["failed"]:
        text += f" · {row['failed']} FAILED"
    return text


def _acceptance_cell(row: Row | None) -> str:
    return _cell(row, "acceptance_mean", lambda r: _pct(r["acceptance_mean"]))


def _extreme(rows: Sequence[Row], key: str, pick: Any) -> float | None:
    values = [r[key] for r in rows if r[key] is not None]
    return pick(values) if values else None


def _ms(value: float) -> str:
    if value < 10:
        return f"{value:.2f}"
    if value < 1000:
        return f"{value:.1f}"
    return f"{value:,.0f}"


def _pct(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{100 * value:.{digits}f}%"


def _sci(value: float | None) -> str:
    return "–" if value is None else f"{value:.1e}"
