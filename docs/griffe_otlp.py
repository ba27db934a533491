"""Griffe extension for the API reference (``mkdocs.yml`` loads it).

* The docstrings are numpy-style with Sphinx cross-reference roles (``:func:`otlp.verify```),
  which Markdown does not know: each role becomes inline code.
* ``otlp.solve``'s docstring has a "Methods" section whose ``{methods}`` placeholder
  ``import otlp`` fills from the method registry (:func:`otlp.apidoc.methods_section`). The site
  reads the sources statically and shows the same registry as a table just above the function
  (``<!-- apidoc: methods -->`` in ``docs/api.md``), so the section is dropped here.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|obj|exc|const):`~?([^`]+)`")
METHODS_SECTION = re.compile(r"^Methods\n-+\n\{methods\}\n+", re.M)


class OtlpDocstrings(griffe.Extension):
    """Sphinx roles to inline code; the placeholder section of ``otlp.solve`` dropped."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is None:
            return
        text = ROLE.sub(r"`\1`", obj.docstring.value)
        if obj.path == "otlp.api.solve":
            text = METHODS_SECTION.sub("", text)
        obj.docstring.value = text
