"""API reference generated from the registries, so it cannot drift from the code.

:func:`methods_section` fills the method list in :func:`otlp.solve`'s docstring;
:func:`methods_table` and :func:`rules_table` are the tables of the documentation site's API
reference (``docs/api.md``), inserted when the site is built (``mkdocs build``).
``python -m otlp.apidoc`` prints the two tables.
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Sequence

from otlp.methods import _BACKENDS, describe_methods, method_options


def one_line(text: str) -> str:
    """``text`` with its whitespace runs collapsed, for a table cell or a docstring line."""
    return " ".join(text.split())


def _option(param: inspect.Parameter) -> str:
    return f"{param.name}={param.default!r}"


def _options(params: dict[str, inspect.Parameter]) -> str:
    return ", ".join(f"`{_option(p)}`" for p in params.values()) or "—"


def _rule_options(cls: type) -> dict[str, inspect.Parameter]:
    """Named constructor options of a rule (a bare ``**options`` means it takes none)."""
    params = inspect.signature(cls).parameters.values()
    return {p.name: p for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD}


def methods_section(indent: str = "    ") -> str:
    """One line per :func:`otlp.solve` method with its description and options (numpy-style
    definition list, for the docstring)."""
    lines = []
    for name, description in describe_methods().items():
        opts = ", ".join(_option(p) for p in method_options(name).values()) or "no options"
        lines += [f"{indent}``{name!r}``", f"{indent}    {one_line(description)}. Options: {opts}."]
    return "\n".join(lines)


def methods_table() -> str:
    """The Markdown table of :func:`otlp.solve`'s methods: what each solves, its backend and its
    options with their defaults (the API reference page shows it)."""
    out = [
        "| method | what it solves | backend | options (defaults) |",
        "|---|---|---|---|",
    ]
    for name, description in describe_methods().items():
        backend = f"`{_BACKENDS[name]}`" if name in _BACKENDS else "its own"
        opts = _options(method_options(name))
        out.append(f"| `{name}` | {one_line(description)} | {backend} | {opts} |")
    return "\n".join(out)


def rules_table() -> str:
    """The Markdown table of the verification rules of :func:`otlp.rules.get` with their
    options and defaults."""
    from otlp.rules import _RULES

    out = [
        "| rule | lossless | description | options (defaults) |",
        "|---|---|---|---|",
    ]
    for name, cls in _RULES.items():
        lossless = "yes" if getattr(cls, "lossless", True) else "no"
        opts = _options(_rule_options(cls))
        out.append(f"| `{name}` | {lossless} | {one_line(str(cls.description))} | {opts} |")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m otlp.apidoc", description=__doc__)
    parser.parse_args(argv)
    print(f"{methods_table()}\n\n{rules_table()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
