"""Figures: one style table (:mod:`otlp.plotting.style`) and the commands' plots."""
