"""The public API's docstrings are numpy-style with an example each, and the examples run."""

from __future__ import annotations

import doctest

import pytest

import otlp
import otlp.rules

PUBLIC = {
    "otlp.solve": otlp.solve,
    "otlp.Instance": otlp.Instance,
    "otlp.optimal_acceptance": otlp.optimal_acceptance,
    "otlp.verify": otlp.verify,
    "otlp.rules.get": otlp.rules.get,
}


@pytest.mark.parametrize("name", PUBLIC)
def test_docstring_has_numpy_sections_and_a_passing_example(name: str) -> None:
    obj = PUBLIC[name]
    doc = obj.__doc__ or ""
    for section in ("Parameters\n    ----------", "Examples\n    --------"):
        assert section in doc, f"{name}: no {section.split()[0]} section"
    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    tests = [t for t in finder.find(obj, name) if t.examples]
    assert tests, f"{name}: no example"
    for test in tests:
        runner.run(test)
    assert runner.failures == 0, f"{name}: {runner.failures} example(s) failed"


def test_solve_docstring_lists_every_method_with_its_options() -> None:
    doc = otlp.solve.__doc__ or ""
    assert "{methods}" not in doc
    for name in otlp.method_names():
        assert f"``{name!r}``" in doc
    assert "tau=0.001" in doc and "time_limit=None" in doc
