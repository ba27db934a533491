"""Subcommands of the ``otlp`` command line."""
