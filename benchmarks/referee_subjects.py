"""The referee's verdicts on the subjects from the field (issue 26): the subjects table of
docs/referee.md.

For every subject of :data:`otlp.referee.subjects.SUBJECTS`: the verdict of
:func:`otlp.referee.referee` at its default settings (60 seeded cases, epsilon 0.01, false alarm
1e-6) under the subject's protocol and draft scheme (chains only and n = 1 for single-draft
subjects), the minimal failing case and its TV, the time; then its acceptance beside the
optimum on 20 fixed synthetic cases (exact) and on 12 SmolLM2-135M states (Monte Carlo, 300
drafts each, n = 2 or the subject's maximum): :mod:`otlp.referee.gap`. The times are the
verdicts' wall clocks after a warm-up (numba compiles α*'s kernels on first use).

    python benchmarks/referee_subjects.py [--out otlp-results/referee/subjects.json] [NAME ...]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from otlp.referee import referee
from otlp.referee.gap import exact_gap, smollm2_gap
from otlp.referee.generate import position_cases, searched_shapes, tree_cases
from otlp.referee.subjects import SUBJECTS, Subject
from otlp.referee.symbolic import NotEnumerable


def settings(subject: Subject) -> dict[str, object]:
    if subject.protocol == "position":
        return {"max_n": subject.max_children or 3}
    return {"shapes": searched_shapes(subject.shapes, subject.max_children)}


def row(subject: Subject) -> dict[str, object]:
    start = time.perf_counter()
    kw = settings(subject)
    verdict = referee(
        subject.sampler, protocol=subject.protocol, scheme=subject.scheme, name=subject.name, **kw
    )
    seconds = time.perf_counter() - start
    if subject.protocol == "position":
        cases = list(position_cases(20, subject.scheme, seed=1, max_n=int(kw["max_n"])))
    else:
        cases = list(tree_cases(20, subject.scheme, seed=1, shapes=kw["shapes"]))
    try:
        synthetic = exact_gap(subject.sampler, cases)
    except NotEnumerable:
        synthetic = None
    n = 1 if subject.max_children == 1 else 2
    real = smollm2_gap(subject.sampler, subject.protocol, subject.scheme, n=n)
    failure = verdict.failure
    return {
        "subject": subject.name,
        "protocol": subject.protocol,
        "scheme": subject.scheme,
        "expected_lossless": subject.expected_lossless,
        "lossless": verdict.lossless,
        "status": verdict.status,
        "mode": "exact" if verdict.statistical_cases == 0 else "statistical",
        "cases": verdict.cases,
        "seconds": seconds,
        "tv": None if failure is None else failure.tv,
        "minimal_case": None if failure is None else failure.case.describe(),
        "case_json": None if failure is None else failure.case.to_json(),
        "synthetic": None if synthetic is None else synthetic.__dict__,
        "smollm2": real.__dict__ | {"n": n},
        "source": subject.source,
    }


def markdown(rows: list[dict]) -> str:
    lines = [
        "| subject | protocol, scheme | verdict | minimal failing case | TV "
        "| synthetic: acc. / ref. "
        "| SmolLM2: acc. / ref. | time |",
        "|---|---|---|---|---:|---|---|---:|",
    ]
    for r in rows:
        verdict = {"lossless": "lossless", "deviation": "**deviates**", "error": "**error**"}[
            r.get("status", "lossless" if r["lossless"] else "deviation")
        ]
        syn = r["synthetic"]
        real = r["smollm2"]
        syn_text = "—" if syn is None else f"{syn['acceptance']:.3f} / {syn['reference']:.3f}"
        real_text = f"{real['acceptance']:.3f} ± {real['stderr']:.3f} / {real['reference']:.3f}"
        lines.append(
            f"| {r['subject']} | {r['protocol']}, {r['scheme']} | {verdict} ({r['mode']}) | "
            f"{r['minimal_case'] or '—'} | {'—' if r['tv'] is None else format(r['tv'], '.3g')} "
            f"| {syn_text} | {real_text} | {r['seconds']:.1f} s |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="subjects (default: all)")
    parser.add_argument("--out", type=Path, default=Path("otlp-results/referee/subjects.json"))
    args = parser.parse_args()
    np.seterr(all="ignore")  # the subjects' own overflow warnings are not findings
    for subject in list(SUBJECTS.values())[:2]:  # warm-up: numba compiles alpha*'s kernels
        referee(subject.sampler, protocol=subject.protocol, scheme=subject.scheme, cases=2)
    rows = []
    for name in args.names or list(SUBJECTS):
        rows.append(row(SUBJECTS[name]))
        print(markdown(rows[-1:]).splitlines()[-1], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1) + "\n")
    print()
    print(markdown(rows))


if __name__ == "__main__":
    main()
