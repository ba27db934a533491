"""Deprecated alias (kept for one release): the argument checks now live in :mod:`otlp.args`
(``validation`` was one of four names for "check": :mod:`otlp.verify` checks plans,
:mod:`otlp.validate` the papers' theorems, :mod:`otlp.args` a call's arguments)."""

from otlp.args import *  # noqa: F403
