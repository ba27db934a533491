"""Check modules; importing this package registers every check."""

from otlp.validate.checks import gr, mentored, multistep, optimum, partial, rules, sketching

__all__ = ["gr", "mentored", "multistep", "optimum", "partial", "rules", "sketching"]
