"""Methods side by side on the same prompts and seeds: the rows of ``otlp decode``'s tables.

A :class:`Config` is one decoding setting (method, K paths × L tokens or a static tree, draft
scheme, temperature, draft model); :func:`run_configs` decodes every prompt with each and, per
temperature and draft, once autoregressively from the same target and cache (the ``ar``
baseline), and returns one :class:`Row` per config: block efficiency ± standard error
(tokens per target call, [GBV] §2), tokens per second, the wall-clock speed-up over the
baseline, and the share of time spent drafting, in the target and verifying.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from otlp.decoding.engine import AUTOREGRESSIVE, DecodeResult, Speculation, decode
from otlp.decoding.models.base import TreeModel

ModelFactory = Callable[[float, str], tuple[TreeModel, TreeModel]]

# Prompts that make SmolLM2-135M-Instruct answer at some length (stories, explanations, lists).
DEFAULT_PROMPTS = (
    "Write a short story about a robot who learns to paint.",
    "Explain how a bicycle works to a ten-year-old.",
    "List five tips for staying productive when working from home, with a sentence on each.",
    "Describe the water cycle step by step.",
)


@dataclass(frozen=True)
class Config:
    """One decoding setting; ``branching`` (a static k-ary tree) replaces K × L paths."""

    method: str
    paths: int = 1
    depth: int = 1
    temperature: float = 1.0
    draft: str = ""
    scheme: str | None = None
    top_k: int | None = None
    branching: tuple[int, ...] = ()

    def speculation(self) -> Speculation:
        if self.method == AUTOREGRESSIVE:
            return Speculation.autoregressive()
        if self.branching:
            from otlp.verification.shapes import k_ary_tree

            tree = k_ary_tree(self.branching)
            return Speculation(self.method, tree, scheme=self.scheme, top_k=self.top_k)
        return Speculation.paths(
            self.method, self.paths, self.depth, scheme=self.scheme, top_k=self.top_k
        )

    def check(self) -> Config:
        """This config, if its method verifies its tree and its scheme's drafts; else a
        ``ValueError`` naming ``method`` or ``scheme`` (checked before any model loads)."""
        from otlp.verification.tree import SCHEMES_OF

        if self.method == AUTOREGRESSIVE:
            return self
        if not valid(self.method, self.paths, self.branching):
            raise ValueError(f"method: {self.method} does not verify a {self.shape} tree")
        schemes = SCHEMES_OF[self.method]
        if self.scheme is not None and self.scheme not in schemes:
            raise ValueError(
                f"scheme: method {self.method!r} verifies children drafted "
                f"{' or '.join(schemes)}, got {self.scheme!r}"
            )
        return self

    @property
    def shape(self) -> str:
        if self.method == AUTOREGRESSIVE:
            return "-"
        if self.branching:
            return "tree " + "x".join(map(str, self.branching))
        return f"{self.paths}x{self.depth}"


@dataclass(frozen=True)
class Row:
    """A config's measured figures (times in seconds, summed over prompts)."""

    method: str
    paths: int
    depth: int
    temperature: float
    draft: str
    scheme: str | None
    shape: str
    prompts: int
    tokens: int
    target_calls: int
    block_efficiency: float
    block_efficiency_se: float
    tokens_per_s: float
    speedup: float
    verify_share: float
    draft_s: float
    target_s: float
    verify_s: float
    wall_s: float
    ar_token_s: float
    target_step_s: float
    draft_step_s: float
    verify_step_s: float

    @property
    def model_speedup(self) -> float:
        """The cost model: block efficiency × t(ar token) / (t(tree forward) + t(L draft
        forwards) + t(verify)), each term a per-step mean of this run."""
        step = self.target_step_s + self.draft_step_s + self.verify_step_s
        return self.block_efficiency * self.ar_token_s / step

    @property
    def draft_ratio(self) -> float:
        """Cost of one draft forward (depth level) over the cost of one ar token."""
        return self.draft_step_s / (self.depth * self.ar_token_s) if self.depth else 0.0

    @property
    def breakeven_draft_ratio(self) -> float:
        """The :attr:`draft_ratio` at which :attr:`model_speedup` would be 1 (negative: the
        tree forward and verification alone cost more than the tokens they yield)."""
        spare = self.block_efficiency * self.ar_token_s - self.target_step_s - self.verify_step_s
        return spare / (self.depth * self.ar_token_s)

    def as_dict(self) -> dict[str, Any]:
        derived = ("model_speedup", "draft_ratio", "breakeven_draft_ratio")
        return {**asdict(self), **{name: getattr(self, name) for name in derived}}


# Methods whose K = 1 case is another method's: every single-step rule is speculative
# sampling on one child, GBV with one path is block verification.
SAME_AT_ONE_PATH = {
    "rrs": "sps",
    "rrs_without_replacement": "sps",
    "kseq": "sps",
    "spechub": "sps",
    "global_resolution": "sps",
    "maxflow_cs": "sps",
    "gbv": "block",
}


def valid(method: str, paths: int, branching: Sequence[int] = ()) -> bool:
    """Whether ``method`` verifies K = ``paths`` draft paths (block: one path; SpecHub's hub
    drafts at most two children per node)."""
    widest = max(branching) if branching else paths
    if method == "block":
        return widest == 1
    if method == "spechub":
        return widest <= 2
    if method == "gbv":
        return not branching
    return True


def run_configs(
    models: ModelFactory,
    prompts: Sequence[Sequence[int]],
    configs: Iterable[Config],
    *,
    max_new_tokens: int,
    seed: int = 0,
    stop_tokens: Sequence[int] = (),
    done: Callable[[Config, DecodeResult], None] | None = None,
) -> list[Row]:
    """Decode ``prompts`` with every config (plus the ``ar`` baseline per temperature and
    draft, run first) and summarise; ``done`` is called after each decode."""
    configs = list(configs)
    baselines: dict[tuple[float, str], DecodeResult] = {}
    rows = []
    for config in configs:
        key = (config.temperature, config.draft)
        target, draft = models(config.temperature, config.draft)
        if key not in baselines:
            ar = Config(AUTOREGRESSIVE, temperature=config.temperature, draft=config.draft)
            baselines[key] = _decode(target, draft, prompts, ar, max_new_tokens, seed, stop_tokens)
            rows.append(summarise(ar, baselines[key], baselines[key]))
            if done is not None:
                done(ar, baselines[key])
        if config.method == AUTOREGRESSIVE:
            continue
        result = _decode(target, draft, prompts, config, max_new_tokens, seed, stop_tokens)
        rows.append(summarise(config, result, baselines[key]))
        if done is not None:
            done(config, result)
    return rows


def _decode(
    target: TreeModel,
    draft: TreeModel,
    prompts: Sequence[Sequence[int]],
    config: Config,
    max_new_tokens: int,
    seed: int,
    stop_tokens: Sequence[int],
) -> DecodeResult:
    return decode(
        target,
        draft,
        prompts,
        config.speculation(),
        max_new_tokens=max_new_tokens,
        stop_tokens=stop_tokens,
        seed=seed,
    )


def summarise(config: Config, result: DecodeResult, baseline: DecodeResult) -> Row:
    calls = max(result.target_calls, 1)
    return Row(
        method=config.method,
        paths=config.paths if not config.branching else max(config.branching),
        depth=config.depth if not config.branching else len(config.branching),
        temperature=config.temperature,
        draft=config.draft,
        scheme=config.scheme,
        shape=config.shape,
        prompts=len(result.tokens),
        tokens=result.generated,
        target_calls=result.target_calls,
        block_efficiency=result.block_efficiency,
        block_efficiency_se=result.block_efficiency_se,
        tokens_per_s=result.tokens_per_s,
        speedup=result.tokens_per_s / baseline.tokens_per_s,
        verify_share=result.verify_share,
        draft_s=result.draft_s,
        target_s=result.target_s,
        verify_s=result.verify_s,
        wall_s=result.wall_s,
        ar_token_s=baseline.wall_s / baseline.generated,
        target_step_s=result.target_s / calls,
        draft_step_s=result.draft_s / calls,
        verify_step_s=result.verify_s / calls,
    )


# ----- the grid of a TOML config -------------------------------------------------------------
_LIST_KEYS = {"methods", "paths", "depths", "temperatures", "drafts", "prompts"}
_KEYS = {
    "methods",
    "paths",
    "depths",
    "temperatures",
    "drafts",
    "max_new_tokens",
    "prompts",
    "seed",
    "model",
    "scheme",
    "top_k",
    "draft_model",
    "precision",
}


@dataclass(frozen=True)
class Grid:
    """A decode benchmark: methods × K × L × temperatures × drafts on a few prompts."""

    methods: tuple[str, ...]
    paths: tuple[int, ...] = (1, 2, 4)
    depths: tuple[int, ...] = (1, 2, 4)
    temperatures: tuple[float, ...] = (0.6, 1.0)
    drafts: tuple[str, ...] = ("",)
    max_new_tokens: int = 64
    prompts: tuple[str, ...] = DEFAULT_PROMPTS
    seed: int = 0
    model: str = "smollm2"
    top_k: int | None = None
    scheme: str | None = None
    draft_model: str | None = None
    precision: str = "float32"

    def configs(self) -> list[Config]:
        """Every valid config of the grid; K = 1 only for ``sps`` and ``block`` (the others
        reduce to them, :data:`SAME_AT_ONE_PATH`), ``sps`` only at K = 1."""
        return [
            Config(method, k, depth, temperature, draft, scheme=self.scheme, top_k=self.top_k)
            for temperature in self.temperatures
            for draft in self.drafts
            for method in self.methods
            for k in self.paths
            for depth in self.depths
            if valid(method, k)
            and not (k == 1 and method in SAME_AT_ONE_PATH)
            and not (k > 1 and method == "sps")
        ]


def read_grid(path: Path) -> Grid:
    """The ``[decode]`` table of a TOML file as a :class:`Grid` (``ValueError`` naming the key
    on bad input)."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"--config: cannot read {path}: {exc}") from None
    table = data.get("decode")
    if not isinstance(table, dict):
        raise ValueError(f"--config: {path} has no [decode] table")
    unknown = set(table) - _KEYS
    if unknown:
        raise ValueError(f"--config: unknown key(s) in [decode]: {', '.join(sorted(unknown))}")
    if "methods" not in table:
        raise ValueError("--config: [decode] needs methods = [...]")
    grid = Grid(**{key: _grid_entry(key, value) for key, value in table.items()})
    for config in grid.configs():
        try:
            config.check()
        except ValueError as exc:
            raise ValueError(f"--config: {exc}") from None
    if not grid.configs():
        raise ValueError(
            "--config: no method of methods verifies any of the paths × depths shapes (block: "
            "one path; spechub: at most two; K = 1 only for sps and block)"
        )
    return grid


def _grid_entry(key: str, value: Any) -> Any:
    """One ``[decode]`` entry checked (``ValueError`` naming ``--config`` and the key), so that
    a bad entry is refused before the first run. Draft names are checked for their form here
    and against the model by the caller (which knows its layers)."""
    from otlp.args import canonical_name, positive_int, real_number
    from otlp.decoding.models.precision import check_precision
    from otlp.decoding.models.selfdraft import check_draft_name
    from otlp.verification.drafting import check_scheme
    from otlp.verification.tree import METHODS

    name = f"--config: {key}"
    checks: dict[str, Callable[[Any], Any]] = {
        "methods": lambda v: canonical_name(v, name),
        "paths": lambda v: positive_int(name, v),
        "depths": lambda v: positive_int(name, v),
        "temperatures": lambda v: real_number(name, v, minimum=0.0),
        "drafts": check_draft_name,
        "max_new_tokens": lambda v: positive_int(name, v),
        "seed": lambda v: positive_int(name, v, minimum=0),
        "top_k": lambda v: positive_int(name, v),
        "scheme": check_scheme,
        "precision": check_precision,
    }
    check = checks.get(key, _nonempty_string)
    try:
        if key in _LIST_KEYS:
            if not isinstance(value, list) or not value:
                raise ValueError("must be a non-empty list")
            items = tuple(check(v) for v in value)
            unknown = [m for m in items if key == "methods" and m not in (AUTOREGRESSIVE, *METHODS)]
            if unknown:
                raise ValueError(f"unknown {', '.join(unknown)}; choose from {', '.join(METHODS)}")
            return items
        return check(value)
    except ValueError as exc:
        message = str(exc).removeprefix(f"{name}: ")
        head, sep, tail = message.partition(": ")
        raise ValueError(f"{name}: {tail if sep and ' ' not in head else message}") from None


def _nonempty_string(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a non-empty string, got {value!r}")
    return value


def markdown(rows: Sequence[Row]) -> str:
    """The table of ``rows`` in Markdown, one line per config."""
    head = (
        "| method | draft | T | K×L | block efficiency | tokens/s | speed-up vs ar "
        "| verify share | draft / target / verify s |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r.method} | {r.draft or '-'} | {r.temperature:g} | {r.shape} "
        f"| {r.block_efficiency:.2f} ± {_se(r.block_efficiency_se)} | {r.tokens_per_s:.1f} "
        f"| {r.speedup:.2f} | {100 * r.verify_share:.1f}% "
        f"| {r.draft_s:.1f} / {r.target_s:.1f} / {r.verify_s:.2f} |"
        for r in rows
    ]
    return head + "\n".join(lines) + "\n"


def cost_markdown(rows: Sequence[Row]) -> str:
    """The cost model per config: per-step means in ms, the modelled speed-up and the draft
    cost (per forward, relative to an ar token) that would make it 1."""
    head = (
        "| method | draft | T | K×L | block eff. | t(ar token) ms | t(tree) ms | t(L drafts) ms "
        "| t(verify) ms | model speed-up | draft cost / ar token | break-even draft cost |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r.method} | {r.draft or '-'} | {r.temperature:g} | {r.shape} "
        f"| {r.block_efficiency:.2f} | {1e3 * r.ar_token_s:.1f} | {1e3 * r.target_step_s:.1f} "
        f"| {1e3 * r.draft_step_s:.1f} | {1e3 * r.verify_step_s:.2f} | {r.model_speedup:.2f} "
        f"| {r.draft_ratio:.2f} | {r.breakeven_draft_ratio:.2f} |"
        for r in rows
        if r.method != AUTOREGRESSIVE
    ]
    return head + "\n".join(lines) + "\n"


def _se(value: float) -> str:
    return "0.00" if not np.isfinite(value) else f"{value:.2f}"
