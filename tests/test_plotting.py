"""Figures: one fixed style per method and rule, every format, no uninformative figure."""

from __future__ import annotations

from pathlib import Path

import pytest

from otlp.plotting import style


def test_a_name_keeps_its_style_whatever_else_is_drawn() -> None:
    alone = style.styles(["maxflow"])["maxflow"]
    crowded = style.styles(["pot", "highs", "maxflow", "global_resolution τ=0.001"])["maxflow"]
    assert alone == crowded == style.style("maxflow-cs".replace("-cs", ""))
    assert style.style("maxflow-cs") == style.style("maxflow_cs")  # old spelling
    assert style.style("some_new_method") == style.style("some_new_method")  # hashed, stable


def test_every_method_and_rule_has_its_own_colour_and_marker() -> None:
    import otlp
    import otlp.rules

    for names in (otlp.method_names(), otlp.rules.names()):
        looks = {(style.style(n).color, style.style(n).marker) for n in names}
        assert len(looks) == len(names)
        assert all(style.canonical(n) in style.TABLE for n in names)


def test_variants_share_the_colour_and_differ_in_line() -> None:
    looks = style.styles(["global_resolution τ=0.001", "global_resolution τ=0.0001"])
    a, b = looks.values()
    assert a.color == b.color and a.linestyle != b.linestyle


def test_lossy_rules_are_drawn_apart() -> None:
    assert style.style("mentored").lossy and style.style("mentored").linestyle == ":"
    assert style.display("mentored") == "mentored (lossy)" and style.display("ot") == "ot"


@pytest.mark.parametrize("fmt", style.FORMATS)
def test_formats(tmp_path: Path, fmt: str) -> None:
    from matplotlib.figure import Figure

    fig = Figure()
    fig.subplots().plot([0, 1], [0, 1])
    out = style.save(fig, tmp_path / "fig.png", fmt)
    assert out.suffix == f".{fmt}" and out.stat().st_size > 0
    assert style.figure_path(Path("a.svg")) == Path("a.svg")
    assert style.figure_path(Path("a.txt")) == Path("a.txt.png")
    assert style.figure_path(Path("s-1.0-time"), "pdf") == Path("s-1.0-time.pdf")
    assert style.figure_path(Path("a.png"), "svg") == Path("a.svg")
    with pytest.raises(ValueError, match="format"):
        style.figure_path(Path("a.png"), "jpg")


def test_compare_and_multistep_write_the_chosen_format(tmp_path: Path) -> None:
    from otlp.cli import main

    compare = tmp_path / "compare"
    args = ["compare", "--generator", "zipf", "--vocab", "200", "--ns", "2,3", "--top-k", "6"]
    assert (
        main([*args, "--rules", "sps,rrs,ot,mentored", "--plot", str(compare), "--format", "svg"])
        == 0
    )
    assert compare.with_suffix(".svg").read_text().lstrip().startswith("<?xml")
    steps = tmp_path / "steps.pdf"
    args = ["multistep", "--vocab", "3", "--lengths", "1,2", "--paths", "1,2", "--no-lp"]
    assert main([*args, "--plot", str(steps)]) == 0
    assert steps.read_bytes()[:4] == b"%PDF"
