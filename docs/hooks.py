"""MkDocs hooks for the otlp documentation site (``mkdocs.yml`` loads this file).

The Markdown sources are written to read well on their own (repository-relative links, the
README as the front page); these hooks make the built site say the same thing:

* ``<!-- include: PATH -->`` inlines a Markdown file (the home page is the README);
* ``<!-- apidoc: methods -->`` / ``<!-- apidoc: rules -->`` insert the method and rule tables
  generated from the registries (:mod:`otlp.apidoc`, one source with ``otlp.solve``'s docstring);
* ``<!-- examples -->`` runs every script in ``examples/`` and shows its code and its output; a
  script that raises fails the build;
* links that leave ``docs/`` (``../benchmarks/results/x.png``) are copied into the site under
  ``repo/`` when they are figures or data, and shown as a path otherwise;
* the citation keys ``[GR]``, ``[SpecHub]``, ... link to the references on the home page.
"""

from __future__ import annotations

import contextlib
import io
import os
import posixpath
import re
import runpy
import time
from functools import cache
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
EXAMPLES = ROOT / "examples"
# Files outside docs/ that the site copies (figures and data); other targets become a path.
COPIED = {".png", ".svg", ".pdf", ".jpg", ".gif", ".csv", ".json", ".toml", ".txt", ".py"}
SITE_PREFIX = "repo"
CITATIONS = ("GR", "SpecHub", "GBV", "Mentored", "Musco")

INCLUDE = re.compile(r"^<!-- include: (\S+) -->$", re.M)
APIDOC = re.compile(r"^<!-- apidoc: (methods|rules) -->$", re.M)
EXAMPLES_MARK = re.compile(r"^<!-- examples -->$", re.M)
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
# Inline links and images: [text](target) or [text](target#anchor); definitions: [key]: target
LINK = re.compile(r"(!?\[([^\]]*)\]\()([^)\s#]+)((?:#[^)\s]*)?\))")
DEFINITION = re.compile(r"^(\[[^\]]+\]:\s+)([^\s#]+)(#\S*)?", re.M)


class ExampleError(PluginError):
    """An example script raised: the build fails with the script's name and the error."""


def run_example(path: Path) -> tuple[str, float]:
    """Run one example script in this process; its printed output and its run time in s."""
    out = io.StringIO()
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(str(path), run_name="__main__")
    except BaseException as exc:  # SystemExit too: an example must run to its end
        raise ExampleError(f"example {path.name} raised {type(exc).__name__}: {exc}") from exc
    return out.getvalue(), time.perf_counter() - start


@cache
def _example_outputs() -> dict[str, tuple[str, float]]:
    return {path.name: run_example(path) for path in sorted(EXAMPLES.glob("*.py"))}


def examples_markdown() -> str:
    """Every example: its docstring as the text, then its code and what it printed."""
    parts = []
    for path in sorted(EXAMPLES.glob("*.py")):
        source = path.read_text()
        doc = ""
        match = re.match(r'"""(.*?)"""\n', source, re.S)
        if match:
            doc, source = match.group(1).strip(), source[match.end() :].lstrip("\n")
        output, seconds = _example_outputs()[path.name]
        title = path.stem.replace("_", " ")
        parts += [
            f"## {title[:1].upper()}{title[1:]}",
            "",
            doc,
            "",
            f"`python examples/{path.name}` ({seconds:.1f} s in this build):",
            "",
            f"```python\n{source.rstrip()}\n```",
            "",
            "Output:",
            "",
            f"```text\n{output.rstrip()}\n```",
            "",
        ]
    return "\n".join(parts)


def _outside_docs(target: Path) -> bool:
    return DOCS not in target.parents and target != DOCS


def _relative(target: str, base: Path) -> Path | None:
    """The repository file a relative link from ``base`` (a folder) points at, or None."""
    if "://" in target or target.startswith(("mailto:", "/")):
        return None
    return Path(os.path.normpath(base / target))


def rewrite_links(text: str, base: Path, page: Path) -> str:
    """Links written relative to ``base`` re-pointed for the page whose source is ``page``
    (outside code blocks): inside docs/ relative to the page, copied files under ``repo/``."""

    def site_target(abs_target: Path) -> str | None:
        if not _outside_docs(abs_target):
            return posixpath.relpath(abs_target.as_posix(), page.parent.as_posix())
        if abs_target.suffix in COPIED and abs_target.is_file():
            copied = DOCS / SITE_PREFIX / abs_target.relative_to(ROOT)
            return posixpath.relpath(copied.as_posix(), page.parent.as_posix())
        return None

    def inline(match: re.Match[str]) -> str:
        abs_target = _relative(match.group(3), base)
        if abs_target is None:
            return match.group(0)
        new = site_target(abs_target)
        if new is None:  # a repository file the site does not copy: its path, as code
            path = f"`{abs_target.relative_to(ROOT).as_posix()}`"
            text = match.group(2)
            return path if text.strip("`") in path else f"{text} ({path})"
        return f"{match.group(1)}{new}{match.group(4)}"

    def definition(match: re.Match[str]) -> str:
        abs_target = _relative(match.group(2), base)
        new = None if abs_target is None else site_target(abs_target)
        if abs_target is None or new is None:
            return match.group(0)
        return f"{match.group(1)}{new}{match.group(3) or ''}"

    pieces, last = [], 0
    for fence in FENCE.finditer(text):
        prose = text[last : fence.start()]
        pieces += [DEFINITION.sub(definition, LINK.sub(inline, prose)), fence.group(0)]
        last = fence.end()
    pieces.append(DEFINITION.sub(definition, LINK.sub(inline, text[last:])))
    return "".join(pieces)


def expand(text: str, source: Path) -> str:
    """``text`` (the Markdown of ``source``) with includes and generated parts expanded and
    links rewritten for ``source``'s place in the site."""
    page = source

    def include(match: re.Match[str]) -> str:
        included = Path(os.path.normpath(source.parent / match.group(1)))
        if not included.is_file():
            raise PluginError(f"{source.name}: include of missing file {match.group(1)}")
        return rewrite_links(included.read_text(), included.parent, page)

    pieces, last = [], 0
    for match in INCLUDE.finditer(text):
        pieces += [rewrite_links(text[last : match.start()], source.parent, page), include(match)]
        last = match.end()
    pieces.append(rewrite_links(text[last:], source.parent, page))
    text = "".join(pieces)
    text = APIDOC.sub(lambda m: _apidoc(m.group(1)), text)
    return EXAMPLES_MARK.sub(lambda m: examples_markdown(), text)


def _apidoc(part: str) -> str:
    from otlp.apidoc import methods_table, rules_table

    return methods_table() if part == "methods" else rules_table()


def _citation_links(text: str, page: Path) -> str:
    """Reference definitions for the citation keys the page uses and does not define."""
    home = posixpath.relpath((DOCS / "index.md").as_posix(), page.parent.as_posix())
    keys = [k for k in CITATIONS if f"[{k}]" in text and f"\n[{k}]:" not in text]
    return "".join(f"\n[{k}]: {home}#references" for k in keys)


def copied_files(text: str, source: Path) -> set[Path]:
    """Repository files outside docs/ that a page links to and the site copies."""
    found: set[Path] = set()
    bases = [(text, source.parent)]
    for match in INCLUDE.finditer(text):
        included = Path(os.path.normpath(source.parent / match.group(1)))
        if included.is_file():
            bases.append((included.read_text(), included.parent))
    for body, base in bases:
        prose = FENCE.sub("", body)
        targets = [m.group(3) for m in LINK.finditer(prose)]
        targets += [m.group(2) for m in DEFINITION.finditer(prose)]
        for target in targets:
            abs_target = _relative(target, base)
            if (
                abs_target is not None
                and _outside_docs(abs_target)
                and abs_target.suffix in COPIED
                and abs_target.is_file()
            ):
                found.add(abs_target)
    return found


def on_files(files: Files, config: Any) -> Files:
    wanted: set[Path] = set()
    for file in files.documentation_pages():
        if file.abs_src_path:
            source = Path(file.abs_src_path)
            wanted |= copied_files(source.read_text(), source)
    for target in sorted(wanted):
        uri = f"{SITE_PREFIX}/{target.relative_to(ROOT).as_posix()}"
        files.append(File.generated(config, uri, abs_src_path=str(target)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    source = Path(page.file.abs_src_path)
    text = expand(markdown, source)
    return text + _citation_links(text, source)
