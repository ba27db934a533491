"""A target and its draft for the decode loop: SmolLM2 or a user's own models, with one tokenizer.

:func:`load_model_pair` takes the target (``"smollm2"``, ``"gemma3"`` or the path of a model,
:mod:`~otlp.decoding.models.local`) and optionally a draft model (a second path); without one,
drafts are self-speculative (:mod:`~otlp.decoding.models.selfdraft`: the target's own layers,
or prompt lookup). Target and draft must share a tokenizer: the same vocabulary size and the
same token → id mapping, checked on the files before any tokenizer is built where they allow it
(:mod:`~otlp.decoding.models.vocab`), and on the built tokenizers before any weights are read.

The returned :class:`ModelPair` is a ``ModelFactory`` of :mod:`otlp.decoding.grid`
(``pair(temperature, draft)`` → tree models), and encodes prompts and decodes tokens.
``precision="int8"`` or ``"bfloat16"`` runs both models on the CPU fast path
(:mod:`~otlp.decoding.models.precision`); :meth:`ModelPair.fidelity` measures how far that
moves the next-token laws. Decoding stays lossless with respect to the models actually run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from otlp.decoding.models import gemma3, local, selfdraft
from otlp.decoding.models.base import TreeModel
from otlp.decoding.models.hf import HFTreeLM
from otlp.decoding.models.lookup import PromptLookup, lookup_spec
from otlp.decoding.models.precision import (
    Fidelity,
    check_precision,
    convert,
    fidelity,
    suite_sequences,
)
from otlp.decoding.models.prefix import PrefixLM
from otlp.decoding.models.vocab import check_files_share_vocabulary, check_same_vocabulary

SMOLLM2 = "smollm2"
GEMMA3 = gemma3.NAME


class ModelPair:
    """A target LM, its draft (a second LM or self-speculative drafts of the target) and their
    tokenizer. ``models`` are ``transformers`` causal LMs already at ``precision``;
    ``references`` the float32 originals (for :meth:`fidelity`)."""

    def __init__(
        self,
        tokenizer: Any,
        target: Any,
        *,
        name: str,
        draft: Any = None,
        draft_name: str = "",
        presets: Mapping[str, Sequence[int]] | None = None,
        precision: str = "float32",
        references: tuple[Any, Any] | None = None,
    ) -> None:
        if draft is not None and not draft_name:
            raise ValueError("draft_name: required with a draft model")
        self.tokenizer = tokenizer
        self.target_model = target
        self.draft_model = draft
        self.name = name
        self.draft_name = draft_name
        self.presets = dict(presets or {})
        self.precision = precision
        self.references = references
        self.layers = len(target.model.layers)
        self.vocab_size = int(target.config.vocab_size)
        self._cache: dict[tuple[float, str], tuple[TreeModel, TreeModel]] = {}

    @property
    def default_draft(self) -> str:
        """The draft model's name, else ``skip4`` for SmolLM2 and ``lookup`` for others."""
        if self.draft_model is not None:
            return self.draft_name
        return "skip4" if "skip4" in self.presets else "lookup"

    def check_draft(self, spec: str) -> str:
        """``spec`` if this pair can draft with it (``ValueError`` naming ``draft`` if not)."""
        if self.draft_model is not None:
            if spec != self.draft_name:
                raise ValueError(
                    f"draft: this pair drafts with its draft model {self.draft_name!r}, "
                    f"got {spec!r}"
                )
            return spec
        return selfdraft.check_draft(spec, self.layers, self.presets)

    def __call__(self, temperature: float, draft: str = "") -> tuple[TreeModel, TreeModel]:
        """(target, draft) tree models at ``temperature``; ``draft`` names a self-speculative
        draft (default :attr:`default_draft`). Built once per (temperature, draft)."""
        spec = self.check_draft(draft or self.default_draft)
        key = (float(temperature), spec)
        if key not in self._cache:
            target = HFTreeLM(self.target_model, temperature=temperature, name=self.name)
            self._cache[key] = (target, self._draft(spec, temperature))
        return self._cache[key]

    def _draft(self, spec: str, temperature: float) -> TreeModel:
        if self.draft_model is not None:
            return HFTreeLM(self.draft_model, temperature=temperature, name=spec)
        if (parsed := lookup_spec(spec)) is not None:
            ngram, width = parsed
            # Not tempered: the lookup law is no model's belief, and T = 0 would keep one
            # candidate.
            return PrefixLM(PromptLookup(self.vocab_size, ngram=ngram, width=width), name=spec)
        layers = selfdraft.draft_layers(spec, self.layers, self.presets)
        return HFTreeLM(self.target_model, layers=layers, temperature=temperature, name=spec)

    def encode_prompt(self, text: str) -> list[int]:
        """Token ids of ``text`` as a user turn in the chat template (when the tokenizer has
        one), ready to continue; else the plain text's ids."""
        if getattr(self.tokenizer, "chat_template", None):
            text = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
            )
        ids = [int(t) for t in self.tokenizer(text).input_ids]
        if not ids:
            raise ValueError(f"prompt: {text!r} has no tokens")
        return ids

    def decode_text(self, tokens: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(tokens), skip_special_tokens=True))

    @property
    def stop_tokens(self) -> tuple[int, ...]:
        eos = getattr(self.tokenizer, "eos_token_id", None)
        return () if eos is None else (int(eos),)

    def fidelity(self, limit: int | None = None) -> dict[str, Fidelity]:
        """Per model run (``"target"``, and ``"draft"`` for a draft model), its
        :class:`~otlp.decoding.models.precision.Fidelity` to float32 on the prompt suite
        (the first ``limit`` texts); empty in float32."""
        if self.references is None:
            return {}
        sequences = suite_sequences(self.tokenizer, limit)
        runs = {"target": (self.references[0], self.target_model)}
        if self.draft_model is not None:
            runs["draft"] = (self.references[1], self.draft_model)
        return {
            role: fidelity(ref, model, sequences, self.precision)
            for role, (ref, model) in runs.items()
        }

    def __repr__(self) -> str:
        draft = self.draft_name or "self-speculative"
        return f"ModelPair({self.name}, draft={draft}, {self.precision})"


def resolve_model(model: str | Path, flag: str = "model") -> local.ModelSource | None:
    """None for the embedded SmolLM2 (``"smollm2"`` or the GGUF file that
    :mod:`otlp.instances.realmodel.fetch` fetched, which loads from its float32 cache), else the
    checked :class:`~otlp.decoding.models.local.ModelSource` of a path, or of the fetched Gemma
    3 GGUF for ``"gemma3"`` (:mod:`~otlp.decoding.models.gemma3`; labelled ``gemma3`` also when
    given by its path)."""
    if str(model) == SMOLLM2:
        return None
    if str(model) == GEMMA3:
        return gemma3.source(flag)
    source = local.inspect_model(model, flag)
    if _is_smollm2_file(source.path):
        return None
    return replace(source, label=GEMMA3) if gemma3.is_fetched_file(source.path) else source


def _is_smollm2_file(path: Path) -> bool:
    from otlp.instances.realmodel.fetch import gguf_path

    return gguf_path().exists() and path == gguf_path().resolve()


def model_files(source: local.ModelSource | None) -> Path:
    """Where a resolved model's files are (:func:`resolve_model`): its path, or for the
    embedded SmolLM2 (None) the GGUF file its tokenizer and weights come from."""
    if source is None:
        from otlp.instances.realmodel.fetch import gguf_path

        return gguf_path()
    return source.path


def _tokenizer(source: local.ModelSource | None, flag: str) -> Any:
    if source is None:
        from otlp.decoding.models import smollm2

        return smollm2.load()[0]
    return local.load_tokenizer(source, flag)


def _weights(source: local.ModelSource | None, flag: str) -> Any:
    if source is None:
        from otlp.decoding.models import smollm2

        return smollm2.load()[1]
    return local.load_model(source, flag)


def load_model_pair(
    target: str | Path = SMOLLM2,
    draft: str | Path | None = None,
    *,
    precision: str = "float32",
    target_flag: str = "target",
    draft_flag: str = "draft",
    files_checked: bool = False,
) -> ModelPair:
    """Load the target (``"smollm2"`` or a model path) and the optional draft model (a path, or
    ``"smollm2"``), check that they share a tokenizer, and convert both to ``precision``.

    Errors are ``ValueError`` naming ``target_flag`` or ``draft_flag`` (a command line passes
    its own flag names): a missing path, not a model, an unsupported architecture, different
    tokenizers or output vocabularies. The vocabularies are compared on the files before any
    tokenizer is built where the files allow it (:func:`~otlp.decoding.models.vocab.
    check_files_share_vocabulary`; skipped with ``files_checked``, for a caller that ran it on
    these files already), then on the built tokenizers before weights are read.
    """
    precision = check_precision(precision)
    if not isinstance(files_checked, bool):
        raise ValueError(f"files_checked: expected True or False, got {files_checked!r}")
    source = resolve_model(target, target_flag)
    has_draft, draft_source = draft is not None, None
    if draft is not None:
        draft_source = resolve_model(draft, draft_flag)
        if not files_checked:
            check_files_share_vocabulary(
                model_files(source), model_files(draft_source), target_flag, draft_flag
            )
    tokenizer = _tokenizer(source, target_flag)
    if has_draft:
        draft_vocab = _tokenizer(draft_source, draft_flag).get_vocab()
        check_same_vocabulary(tokenizer.get_vocab(), draft_vocab, target_flag, draft_flag)
    model = _weights(source, target_flag)
    draft_model = _weights(draft_source, draft_flag) if has_draft else None
    if draft_model is not None and draft_model.config.vocab_size != model.config.vocab_size:
        raise ValueError(
            f"{draft_flag}: its output layer has {draft_model.config.vocab_size} tokens, "
            f"{target_flag}'s {model.config.vocab_size}: target and draft must share a vocabulary"
        )
    presets: dict[str, tuple[int, ...]] = {}
    if source is None:
        from otlp.decoding.models import smollm2

        presets = smollm2.presets()
    return ModelPair(
        tokenizer,
        convert(model, precision),
        name=SMOLLM2 if source is None else source.name,
        draft=None if draft_model is None else convert(draft_model, precision),
        draft_name=(SMOLLM2 if draft_source is None else draft_source.name) if has_draft else "",
        presets=presets,
        precision=precision,
        references=None if precision == "float32" else (model, draft_model),
    )
