"""Exceptions raised at the otlp API boundary."""

from __future__ import annotations


class ProblemTooLarge(ValueError):
    """A problem would exceed a configured limit; raised before the work or allocation."""

    def __init__(
        self,
        what: str,
        variables: int,
        bytes_needed: int,
        limit: int,
        *,
        unit: str = "variables",
        setting: str = "max_variables",
        advice: str = "lower top_k or n",
    ) -> None:
        self.what = what
        self.variables = variables
        self.bytes_needed = bytes_needed
        self.limit = limit
        size = f"more than 2^256 {unit}" if variables > 2**256 else f"{variables:,} {unit}"
        memory = (
            f" (about {bytes_needed / 2**30:.2f} GiB)"
            if bytes_needed and variables <= 2**256
            else ""
        )
        super().__init__(
            f"{what} would need {size}{memory}, over the limit of {limit:,} {unit}; "
            f"{advice}, or raise the limit with otlp.limits.configure({setting}=...)"
        )
