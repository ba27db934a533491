"""Exceptions raised at the otlp API boundary."""

from __future__ import annotations


class ProblemTooLarge(ValueError):
    """A problem would exceed the configured size limit; raised before anything is allocated."""

    def __init__(self, what: str, variables: int, bytes_needed: int, limit: int) -> None:
        self.what = what
        self.variables = variables
        self.bytes_needed = bytes_needed
        self.limit = limit
        super().__init__(
            f"{what} would need {variables:,} variables (about {bytes_needed / 2**30:.2f} GiB), "
            f"over the limit of {limit:,} variables; lower top_k or n, or raise the limit with "
            f"otlp.limits.configure(max_variables=...)"
        )
