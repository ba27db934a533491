"""The documentation stands alone: no private names, every citation key and link resolves, the
site builds with warnings as errors and runs its examples, and the README's headline tables are
the benchmark pages' numbers."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
CONFIGS = sorted((ROOT / "benchmarks" / "configs").glob("*.toml"))
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
# Names that only exist outside the repository (the development notes and source files).
PRIVATE = re.compile(r"(?i:\bseeds?[ -]?0\d\d|\bseeds/)|DESIGN\.md")
CITATION = re.compile(r"\[(GR|SpecHub|GBV|Mentored|Musco)\]")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("otlp_docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", DOCS + CONFIGS + EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
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


def test_api_reference_tables_come_from_the_registries() -> None:
    """docs/api.md holds no copy of the registries: the build inserts the tables, which list
    every method and rule with its options."""
    import otlp
    import otlp.rules
    from otlp.apidoc import methods_table, rules_table

    page = (ROOT / "docs" / "api.md").read_text()
    assert "<!-- apidoc: methods -->" in page and "<!-- apidoc: rules -->" in page
    assert "| `" not in page, "docs/api.md copies a registry table: use the apidoc markers"
    methods, rules = methods_table(), rules_table()
    for name in otlp.method_names():
        assert f"| `{name}` |" in methods
    for name in otlp.rules.names():
        assert f"| `{name}` |" in rules
    assert "`tau=0.001`" in methods and "`kl_budget=0.05`" in rules


def test_api_reference_objects_exist_and_have_docstrings() -> None:
    """Each ``::: name`` of docs/api.md imports and has a docstring (a rename fails here with
    the name, before the build)."""
    import importlib

    names = re.findall(r"^::: (\S+)$", (ROOT / "docs" / "api.md").read_text(), re.M)
    assert "otlp.solve" in names and "otlp.verify_drafts" in names
    for name in names:
        module, _, attr = name.rpartition(".")
        obj = getattr(importlib.import_module(module), attr, None)
        assert obj is not None, f"docs/api.md: {name} does not exist"
        assert (obj.__doc__ or "").strip(), f"docs/api.md: {name} has no docstring"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built by ``mkdocs build --strict`` (warnings fail it; every example runs)."""
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    return out


def test_site_builds_strictly_with_every_page(site: Path) -> None:
    pages = [p for p in DOCS if p.parent != ROOT]
    for page in pages:
        rel = page.relative_to(ROOT / "docs").with_suffix("")
        built = site / (rel.parent if rel.name == "index" else rel) / "index.html"
        assert built.is_file(), f"{page.relative_to(ROOT)} was not built"
    home = (site / "index.html").read_text()
    assert "Two commands" in home and 'id="references"' in home  # the README is the home page


def test_site_copies_the_figures_it_shows(site: Path) -> None:
    html = (site / "benchmarks" / "index.html").read_text()
    figures = re.findall(r'<img[^>]+src="([^"]+)"', html)
    assert figures, "the main job's figures are missing"
    for src in figures:
        assert (site / "benchmarks" / src).resolve().is_file(), src


def test_every_example_runs_in_the_build_and_shows_its_output(site: Path) -> None:
    html = (site / "examples" / "index.html").read_text()
    assert EXAMPLES
    for path in EXAMPLES:
        assert f"python examples/{path.name}" in html, f"{path.name} is not on the page"
    # exact_methods.py prints one verified line per method: its output is on the page
    assert html.count("verified True") >= 5


def test_an_example_that_raises_fails_the_build(tmp_path: Path) -> None:
    hooks = _hooks()
    script = tmp_path / "broken.py"
    script.write_text('print("before")\nraise RuntimeError("boom")\n')
    with pytest.raises(hooks.ExampleError, match=r"broken\.py raised RuntimeError: boom"):
        hooks.run_example(script)
    script.write_text("import sys\nsys.exit(3)\n")
    with pytest.raises(hooks.ExampleError, match="SystemExit"):
        hooks.run_example(script)
    script.write_text('print("fine")\n')
    assert hooks.run_example(script)[0] == "fine\n"


def test_links_leaving_docs_are_rewritten_for_the_site() -> None:
    hooks = _hooks()
    page = ROOT / "docs" / "guide" / "x.md"
    text = (
        "![f](../../benchmarks/results/compare.png) [d](../design.md#a) "
        "[`instances/data/smollm2.md`](../../instances/data/smollm2.md) [w](https://x.org/a.md)"
    )
    out = hooks.rewrite_links(text, page.parent, page)
    assert "![f](../repo/benchmarks/results/compare.png)" in out
    assert "[d](../design.md#a)" in out
    assert "`instances/data/smollm2.md`" in out and "](../../instances" not in out
    assert "[w](https://x.org/a.md)" in out
    # README links (relative to the repository root) seen from docs/index.md
    readme = hooks.rewrite_links("[g](docs/guide/cli.md)", ROOT, ROOT / "docs" / "index.md")
    assert readme == "[g](guide/cli.md)"


# Pages that hold measured tables outside docs/benchmarks/ (each with its command).
MEASUREMENT_PAGES = [
    ROOT / "docs" / "gr-schemes.md",
    ROOT / "docs" / "decoding.md",
    ROOT / "docs" / "guide" / "fuzz.md",
    ROOT / "docs" / "mutation-testing.md",
    ROOT / "docs" / "referee.md",
    ROOT / "docs" / "decoding-api.md",
    ROOT / "docs" / "partial-resolution.md",
    ROOT / "docs" / "optimum.md",
]


def _table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]


def test_readme_headline_tables_are_the_benchmark_pages_numbers() -> None:
    """One source of numbers: every table row of the README is on a benchmark page."""
    readme = _table_rows((ROOT / "README.md").read_text())
    sources = [*(ROOT / "docs" / "benchmarks").glob("*.md"), *MEASUREMENT_PAGES]
    pages = "\n".join(p.read_text() for p in sources)
    measured = [row for row in readme if re.search(r"\d\.\d", row)]
    assert len(measured) >= 10
    missing = [row for row in measured if row not in pages]
    assert not missing, f"README rows not on a benchmark page: {missing}"


def test_readme_is_a_front_page() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    for page in ("docs/getting-started.md", "docs/benchmarks/index.md", "docs/api.md"):
        assert f"]({page})" in text
