"""Models for the decoding engine: the tree-model protocol and its adapters.

* :mod:`~otlp.decoding.models.base` — :class:`TreeModel` / :class:`TreeSession`, temperature;
* :mod:`~otlp.decoding.models.prefix` — any function of prefixes (the toy models of
  :mod:`otlp.multistep.models`), memoised or not;
* :mod:`~otlp.decoding.models.memo` — any tree model with a memo of its laws by prefix
  (repeated first steps of a prompt);
* :mod:`~otlp.decoding.models.hf` — ``transformers`` causal LMs with a KV cache and tree
  attention, layer-subset drafts;
* :mod:`~otlp.decoding.models.smollm2` — the embedded SmolLM2-135M default (needs the ``llm``
  extra; imported lazily);
* :mod:`~otlp.decoding.models.local` — a user's own model on disk (folder or GGUF), checked
  before it loads;
* :mod:`~otlp.decoding.models.selfdraft` — self-speculative draft names (``exitN``, ``skipN``,
  ``skip:i,j``, ``lookupN``);
* :mod:`~otlp.decoding.models.precision` — the CPU fast path (int8, bfloat16) and its fidelity
  to float32;
* :mod:`~otlp.decoding.models.vocab` — a model's vocabulary read from its files (a draft with
  another tokenizer refused before either tokenizer is built);
* :mod:`~otlp.decoding.models.pair` — :func:`~otlp.decoding.models.pair.load_model_pair`: a
  target and its draft with one tokenizer.
"""

from otlp.decoding.models.base import TreeModel, TreeSession, tempered
from otlp.decoding.models.memo import MemoizedTreeLM
from otlp.decoding.models.prefix import Memoized, PrefixLM

__all__ = ["Memoized", "MemoizedTreeLM", "PrefixLM", "TreeModel", "TreeSession", "tempered"]
