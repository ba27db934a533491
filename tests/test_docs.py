"""The documentation stands alone: no private names, every citation key and link resolves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CONFIGS = sorted((ROOT / "benchmarks" / "configs").glob("*.toml"))
# Names that only exist outside the repository (the development notes and source files).
PRIVATE = re.compile(r"(?i:\bseeds?[ -]?0\d\d|\bseeds/)|DESIGN\.md")
CITATION = re.compile(r"\[(GR|SpecHub|GBV|Mentored|Musco)\]")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("path", DOCS + CONFIGS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_private_names(path: Path) -> None:
    hits = [m.group(0) for m in PRIVATE.finditer(path.read_text())]
    assert not hits, f"{path.name} mentions {sorted(set(hits))}; cite [GR], [SpecHub], ..."


def test_every_citation_key_has_a_reference() -> None:
    text = (ROOT / "README.md").read_text()
    references = text[text.index("\n## References") :]
    defined = set(re.findall(r"^\* \*\*\[(\w+)\]\*\*", references, re.MULTILINE))
    used = {key for path in DOCS for key in CITATION.findall(path.read_text())}
    assert used <= defined, f"cited without a reference: {sorted(used - defined)}"
    assert defined == {"GR", "SpecHub", "GBV", "Mentored", "Musco"}
    for key in defined:  # the keys render as links to the References section
        assert f"\n[{key}]: #references" in text


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_at_files(path: Path) -> None:
    targets = [t for t in LINK.findall(path.read_text()) if "://" not in t]
    missing = [t for t in targets if not (path.parent / t).exists()]
    assert not missing, f"{path.name} links to missing files: {missing}"


def test_api_reference_is_generated_from_the_registries() -> None:
    from otlp.apidoc import API_MD, render

    assert API_MD.read_text() == render(), "docs/api.md is stale: run python -m otlp.apidoc"


def test_api_reference_lists_every_method_and_rule_with_its_options() -> None:
    import otlp
    import otlp.rules
    from otlp.apidoc import render

    text = render()
    for name in otlp.method_names():
        assert f"| `{name}` |" in text
    for name in otlp.rules.names():
        assert f"| `{name}` |" in text
    assert "`tau=0.001`" in text and "`kl_budget=0.05`" in text
