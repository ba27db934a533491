"""Models for the decoding engine: the tree-model protocol and its adapters.

* :mod:`~otlp.decoding.models.base` — :class:`TreeModel` / :class:`TreeSession`, temperature;
* :mod:`~otlp.decoding.models.prefix` — any function of prefixes (the toy models of
  :mod:`otlp.multistep.models`), memoised or not;
* :mod:`~otlp.decoding.models.hf` — ``transformers`` causal LMs with a KV cache and tree
  attention, layer-subset drafts;
* :mod:`~otlp.decoding.models.smollm2` — the embedded SmolLM2-135M default (needs the ``llm``
  extra; imported lazily).
"""

from otlp.decoding.models.base import TreeModel, TreeSession, tempered
from otlp.decoding.models.prefix import Memoized, PrefixLM

__all__ = ["Memoized", "PrefixLM", "TreeModel", "TreeSession", "tempered"]
