"""Checking a paper's statements on random instances, wrong ones included.

Every checkable statement of the five papers is a named check returning a margin (< 0 means
violated). Statements that are wrong as printed are registered too and must be refuted: here
[Musco]'s QJL constant, whose printed form is biased by √2 (see the errata). See the guide page
"Validating the papers".
"""

import otlp.validate

report = otlp.validate.run(["gr.thm3_1", "musco.qjl"], count=5, seed=0)
print(f"all as expected: {report.ok}")
for result in report.results:
    status = "must be refuted" if result.expect_fail else "must hold"
    print(
        f"{result.name:<42} {status:<16} passed {result.passed}/{result.tried},"
        f" worst margin {result.worst_margin:.2g}"
    )
