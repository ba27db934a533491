"""The CPU fast path: a model's linear layers in int8, or all of it in bfloat16, and how far its
next-token laws move from the float32 model's.

* ``"int8"`` — dynamic quantisation of every ``torch.nn.Linear`` (``lm_head`` included):
  int8 weights, activations quantised per call (``torch.ao.quantization.quantize_dynamic``);
* ``"bfloat16"`` — every weight and activation in bfloat16;
* ``"float32"`` — the model as loaded.

:func:`convert` returns a converted copy (the float32 model is kept for the comparison).
Speculative decoding stays lossless with respect to the model actually run: every
verification rule reproduces the converted target's laws exactly, and those differ from the
float32 model's by the :class:`Fidelity` that :func:`fidelity` measures — mean KL(p_float32 ‖
p) and total variation of next-token laws at every position of a prompt suite
(:func:`suite_sequences`: the teacher-forced prompts of :mod:`otlp.instances.realmodel.prompts`).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from otlp.decoding.models.hf import HFTreeLM, KVCache

PRECISIONS = ("float32", "bfloat16", "int8")


def check_precision(precision: object) -> str:
    """``precision`` if it is one of :data:`PRECISIONS`, else a ``ValueError`` naming it."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision: expected one of {', '.join(PRECISIONS)}, got {precision!r}")
    return str(precision)


def convert(model: Any, precision: str) -> Any:
    """``model`` at ``precision``: itself for float32, else a converted copy."""
    import torch

    if check_precision(precision) == "float32":
        return model
    if precision == "bfloat16":
        return copy.deepcopy(model).to(torch.bfloat16).eval()
    with warnings.catch_warnings():  # torch.ao's notices that quantisation moves to torchao
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        from torch.ao.quantization import quantize_dynamic

        return quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8).eval()


@dataclass(frozen=True)
class Fidelity:
    """How far a converted model's next-token laws are from the float32 model's (T = 1)."""

    precision: str
    mean_kl: float  # mean over positions of KL(p_float32 ‖ p_converted), nats
    mean_tv: float  # mean total variation distance
    max_tv: float
    positions: int
    sequences: int

    def describe(self) -> str:
        return (
            f"{self.precision} vs float32: mean KL {self.mean_kl:.4f} nats, mean TV "
            f"{self.mean_tv:.4f} (max {self.max_tv:.3f}) over {self.positions} next-token laws "
            f"of {self.sequences} texts"
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def fidelity(
    reference: Any, model: Any, sequences: Sequence[Sequence[int]], precision: str
) -> Fidelity:
    """KL and TV between the next-token laws of ``reference`` (float32) and ``model`` (the
    same weights at ``precision``) at every position of every token sequence."""
    kls: list[float] = []
    tvs: list[float] = []
    for ids in sequences:
        if len(ids) < 1:
            raise ValueError("sequences: every sequence needs at least one token")
        base = _log_laws(reference, ids)
        other = _log_laws(model, ids)
        p, q = np.exp(base), np.exp(other)
        kls.extend(np.sum(p * (base - other), axis=1))
        tvs.extend(0.5 * np.abs(p - q).sum(axis=1))
    if not kls:
        raise ValueError("sequences: expected at least one sequence")
    return Fidelity(
        precision=check_precision(precision),
        mean_kl=float(np.mean(kls)),
        mean_tv=float(np.mean(tvs)),
        max_tv=float(np.max(tvs)),
        positions=len(kls),
        sequences=len(sequences),
    )


def _log_laws(model: Any, ids: Sequence[int]) -> np.ndarray:
    """Float64 log-softmax of the logits after every prefix of ``ids`` (one causal forward,
    through the tree adapter that decodes)."""
    import torch

    length = len(ids)
    mask = torch.ones(length, length, dtype=torch.bool).tril()
    logits = HFTreeLM(model).logits(
        torch.as_tensor(list(ids)), torch.arange(length), mask, KVCache(), list(range(length))
    )
    return np.asarray(logits.double().log_softmax(dim=-1).numpy())


def suite_sequences(tokenizer: Any, limit: int | None = None) -> list[list[int]]:
    """Token ids of the teacher-forced prompt suite (:data:`otlp.instances.realmodel.prompts.
    PROMPTS`: user turn and reply, in the tokenizer's chat template when it has one)."""
    from otlp.instances.realmodel.prompts import PROMPTS

    out = []
    for prompt in PROMPTS[:limit]:
        if getattr(tokenizer, "chat_template", None):
            head = tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt.user}],
                tokenize=False,
                add_generation_prompt=True,
            )
            text = head + prompt.continuation
        else:
            text = f"{prompt.user}\n{prompt.continuation}"
        out.append([int(t) for t in tokenizer(text).input_ids])
    return out
