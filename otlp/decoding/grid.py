"""Methods side by side on the same prompts and seeds, timed by interleaving: the rows of
``otlp decode``'s tables.

A :class:`Config` is one decoding setting (method, K paths × L tokens or a static tree, draft
scheme, temperature, draft model). :func:`run_configs` decodes the prompts in ``rounds``
rounds; in each round every config runs right next to its own run of autoregressive sampling
from the same target and cache (``ar``), on the same prompts and seeds (prompt i of round r
has the i-th seed drawn from ``SeedSequence((seed, r))`` in every run), ``ar`` first in even
rounds and second in odd ones. Every run decodes the prompts one at a time (batch 1: the
latency regime speculative decoding is for, and what ``HFTreeLM`` does with a batch anyway: it
forwards the rows one after the other) and exactly ``max_new_tokens`` tokens per prompt (stop
tokens are not honoured in timing runs, so every run decodes the same number of tokens). A
config's speed-up in a round is its paired ``ar`` run's wall time over its own, two adjacent
runs under the same load; a :class:`Row` reports the median over rounds with the min–max, the
1-minute load average (``os.getloadavg``) at the start of each run, block efficiency ±
standard error over every (step, row) pair of all rounds ([GBV] §2; of the first round at
T = 0, whose rounds replay the same greedy text), tokens per second and the
shares of time spent drafting, in the target and verifying.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from otlp.decoding.loop import AUTOREGRESSIVE, DecodeResult, Speculation, decode
from otlp.decoding.models.base import TreeModel
from otlp.decoding.prompts import FREE_PROMPTS, PROMPT_SETS
from otlp.verification.drafting import MAX_CHILDREN
from otlp.verification.rule_table import RULES, names

ModelFactory = Callable[[float, str], tuple[TreeModel, TreeModel]]

DEFAULT_PROMPTS = FREE_PROMPTS

# The speed-up the cost model asks about (issue 25's goal on this CPU).
TARGET_SPEEDUP = 1.3

# The draft's top-k of a method whose per-node cost grows with the support it is given, when a
# config names none: global resolution over SmolLM2's 49,152 tokens spends 3.4 s a step
# verifying (63% of the wall time); on the draft's top 100 ([GR] Appendix N, the setting of
# its experiments) it is a few milliseconds; partial resolution (exact OT) over the whole
# vocabulary 610 ms a step (47% of the wall time, K x L = 4 x 4), on the top 100 a few ms.
# ``top_k`` >= the vocabulary size asks for all.
DEFAULT_TOP_K = {"global_resolution": 100, "partial_resolution": 100}


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

    @property
    def draft_top_k(self) -> int | None:
        """``top_k``, else the method's :data:`DEFAULT_TOP_K` (None: the whole vocabulary)."""
        return self.top_k if self.top_k is not None else DEFAULT_TOP_K.get(self.method)

    def speculation(self) -> Speculation:
        if self.method == AUTOREGRESSIVE:
            return Speculation.autoregressive()
        top_k = self.draft_top_k
        if self.branching:
            from otlp.verification.shapes import k_ary_tree

            tree = k_ary_tree(self.branching)
            return Speculation(self.method, tree, scheme=self.scheme, top_k=top_k)
        return Speculation.paths(
            self.method, self.paths, self.depth, scheme=self.scheme, top_k=top_k
        )

    def check(self) -> Config:
        """This config, if its method verifies its tree and its scheme's drafts; else a
        ``ValueError`` naming ``method``, ``scheme``, or ``paths`` / ``branching`` where the
        scheme cannot draft that many children (checked before any model loads)."""
        if self.method == AUTOREGRESSIVE:
            return self
        self._check_tree_size()
        if not valid(self.method, self.paths, self.branching):
            raise ValueError(f"method: {self.method} does not verify a {self.shape} tree")
        schemes = RULES[self.method].schemes
        if self.scheme is not None and self.scheme not in schemes:
            raise ValueError(
                f"scheme: method {self.method!r} verifies children drafted "
                f"{' or '.join(schemes)}, got {self.scheme!r}"
            )
        width = max(self.branching) if self.branching else self.paths
        if self.scheme is not None and width > MAX_CHILDREN.get(self.scheme, width):
            field = "branching" if self.branching else "paths"
            raise ValueError(
                f"{field}: scheme 'spechub' drafts at most two children a node (its hub "
                f"joint), got {width}"
            )
        return self

    def _check_tree_size(self) -> None:
        """The draft tree's nodes within ``otlp.limits``, else a ``ValueError`` naming the
        field that sets them (``depth`` or ``paths``, the larger; ``branching``) before the
        tree is built."""
        from otlp.errors import ProblemTooLarge
        from otlp.limits import check_size

        if self.branching:
            nodes, field, advice = 0, "branching", "lower branching"
            width = 1
            for b in self.branching:
                width *= b
                nodes += width
        else:
            nodes = self.paths * self.depth
            field = "depth" if self.depth >= self.paths else "paths"
            advice = "lower paths or depth"
        try:
            check_size("draft tree nodes", nodes, advice=advice)
        except ProblemTooLarge as exc:
            raise ValueError(f"{field}: {exc}") from None

    @property
    def shape(self) -> str:
        if self.method == AUTOREGRESSIVE:
            return "-"
        if self.branching:
            return "tree " + "x".join(map(str, self.branching))
        return f"{self.paths}x{self.depth}"


@dataclass(frozen=True)
class Row:
    """A config's measured figures over its rounds (times in seconds, summed over prompts and
    rounds; ``round_*``: one entry per round, in round order)."""

    method: str
    paths: int
    depth: int
    temperature: float
    draft: str
    scheme: str | None
    top_k: int | None
    shape: str
    prompts: int
    rounds: int
    tokens: int
    target_calls: int
    block_efficiency: float
    block_efficiency_se: float
    tokens_per_s: float
    speedup: float
    speedup_low: float
    speedup_high: float
    round_speedups: tuple[float, ...]
    round_loads: tuple[float, ...]
    round_wall_s: tuple[float, ...]
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
    def draft_share(self) -> float:
        return self.draft_s / self.wall_s if self.wall_s > 0 else float("nan")

    @property
    def target_share(self) -> float:
        return self.target_s / self.wall_s if self.wall_s > 0 else float("nan")

    @property
    def load_low(self) -> float:
        return min(self.round_loads)

    @property
    def load_high(self) -> float:
        return max(self.round_loads)

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

    def needed_block_efficiency(self, speedup: float = TARGET_SPEEDUP) -> float:
        """The block efficiency at which :attr:`model_speedup` would be ``speedup`` with this
        run's per-step costs (above ``depth + 1``: no acceptance rate gets there)."""
        step = self.target_step_s + self.draft_step_s + self.verify_step_s
        return speedup * step / self.ar_token_s

    def as_dict(self) -> dict[str, Any]:
        derived = (
            "draft_share",
            "target_share",
            "load_low",
            "load_high",
            "model_speedup",
            "draft_ratio",
            "breakeven_draft_ratio",
        )
        return {
            **asdict(self),
            **{name: getattr(self, name) for name in derived},
            "needed_block_efficiency": self.needed_block_efficiency(),
        }


# Methods whose K = 1 case is another method's (the rule table's same_at_one_child): every
# single-step rule is speculative sampling on one child, GBV with one path is block
# verification.
SAME_AT_ONE_PATH = {
    name: rule.same_at_one_child for name, rule in RULES.items() if rule.same_at_one_child
}


def valid(method: str, paths: int, branching: Sequence[int] = ()) -> bool:
    """Whether ``method`` verifies K = ``paths`` draft paths, or a tree of ``branching``
    children per depth (:meth:`VerificationRule.verifies
    <otlp.verification.rule_table.VerificationRule.verifies>`); ``ar`` any."""
    rule = RULES.get(method)
    return rule is None or rule.verifies(paths, branching)


@dataclass(frozen=True)
class Run:
    """One timed decode: the config, its round (0-based), the config an ``ar`` run is paired
    with (None for the others), the 1-minute load average at its start and the result."""

    config: Config
    round: int
    load: float
    result: DecodeResult
    pair: Config | None = None


def schedule(configs: Sequence[Config], rounds: int) -> list[tuple[int, Config, Config | None]]:
    """The runs of :func:`run_configs` in order, as (round, config, paired config): in every
    round each config runs right next to its own ``ar`` run at its temperature, ``ar`` first
    in even rounds and second in odd ones, so that each speed-up compares two adjacent runs
    and drift within a pair does not always favour one side."""
    unique = list(dict.fromkeys(c for c in configs if c.method != AUTOREGRESSIVE))
    order: list[tuple[int, Config, Config | None]] = []
    for r in range(rounds):
        for config in unique:
            pair = [(r, baseline(config), config), (r, config, None)]
            order.extend(pair if r % 2 == 0 else pair[::-1])
    return order


def baseline(config: Config) -> Config:
    """The ``ar`` config every config of this temperature is timed against."""
    return Config(AUTOREGRESSIVE, temperature=config.temperature)


def run_configs(
    models: ModelFactory,
    prompts: Sequence[Sequence[int]],
    configs: Iterable[Config],
    *,
    max_new_tokens: int,
    rounds: int = 1,
    seed: int = 0,
    done: Callable[[Run], None] | None = None,
    warm_up: bool = True,
) -> list[Row]:
    """Decode ``prompts`` with every config, each next to its own ``ar`` run, over ``rounds``
    rounds (:func:`schedule`; see the module docstring), and summarise: one row per ``ar``
    baseline (temperature) and config. ``models(T, draft)`` gives the target and draft (an
    ``ar`` run uses the target of its paired config); ``done`` is called after each run.
    ``warm_up``: one untimed step of every config and of its ``ar`` baseline first
    (:func:`_warm_up`), so that no timed run pays a compile or a first allocation."""
    from otlp.args import positive_int

    rounds = positive_int("rounds", rounds)
    configs = list(configs)
    if warm_up:
        _warm_up(models, prompts[0], configs, seed)
    runs: dict[Config, list[Run]] = {}
    for r, config, pair in schedule(configs, rounds):
        drafted = pair if pair is not None else config
        target, draft = models(config.temperature, drafted.draft)
        load = os.getloadavg()[0]
        seeds = np.random.SeedSequence((seed, r)).generate_state(len(prompts))
        result = _merged(
            [
                decode(
                    target,
                    draft,
                    [prompt],
                    config.speculation(),
                    max_new_tokens=max_new_tokens,
                    seed=[int(row_seed)],
                )
                for prompt, row_seed in zip(prompts, seeds, strict=True)
            ]
        )
        run = Run(config, r, load, result, pair)
        runs.setdefault(config, []).append(run)
        if done is not None:
            done(run)
    return [summarise(config, own, runs[baseline(config)]) for config, own in runs.items()]


def _warm_up(
    models: ModelFactory, prompt: Sequence[int], configs: Sequence[Config], seed: int
) -> None:
    """One untimed decoding step of every config and of its ``ar`` baseline on ``prompt``.

    The first call of a verification method compiles (or loads from numba's cache) its
    kernels for the run's dtypes, and a model's first forward allocates its buffers: without
    this step that one-off cost lands in the first timed run's draft, target or verify share
    (with one round, 2.3 s of ``sps``'s first steps on SmolLM2, 59% of its wall time)."""
    for config in dict.fromkeys(c for c in configs if c.method != AUTOREGRESSIVE):
        target, draft = models(config.temperature, config.draft)
        for run in (baseline(config), config):
            decode(target, draft, [prompt], run.speculation(), max_new_tokens=1, seed=seed)


def _merged(results: Sequence[DecodeResult]) -> DecodeResult:
    """The results of several runs as one: every row's tokens, every step, the summed time."""
    return DecodeResult(
        tokens=[t for res in results for t in res.tokens],
        steps=[s for res in results for s in res.steps],
        wall_s=sum(res.wall_s for res in results),
    )


def summarise(config: Config, runs: Sequence[Run], baseline: Sequence[Run]) -> Row:
    """A config's row from its runs and the ``ar`` runs of its temperature (its speed-ups:
    over the ``ar`` run paired with it in each round; the ``ar`` row aggregates every one)."""
    result = _merged([run.result for run in runs])
    # At T = 0 every round replays the same greedy text: block efficiency and its standard
    # error are over the prompts' steps once (pooled rounds would shrink the error by
    # sqrt(rounds) with nothing new behind it); the rounds still time the speed-up.
    quality = _merged([runs[0].result]) if config.temperature == 0 else result
    ar = _merged([run.result for run in baseline])
    if config.method == AUTOREGRESSIVE:
        speedups = tuple(1.0 for _ in runs)
    else:
        paired = {run.round: run.result.wall_s for run in baseline if run.pair == config}
        speedups = tuple(paired[run.round] / run.result.wall_s for run in runs)
    calls = max(result.target_calls, 1)
    return Row(
        method=config.method,
        paths=config.paths if not config.branching else max(config.branching),
        depth=config.depth if not config.branching else len(config.branching),
        temperature=config.temperature,
        draft=config.draft,
        scheme=config.scheme,
        top_k=config.draft_top_k,
        shape=config.shape,
        prompts=len(runs[0].result.tokens),
        rounds=len(runs),
        tokens=result.generated,
        target_calls=result.target_calls,
        block_efficiency=quality.block_efficiency,
        block_efficiency_se=quality.block_efficiency_se,
        tokens_per_s=result.tokens_per_s,
        speedup=float(np.median(speedups)),
        speedup_low=min(speedups),
        speedup_high=max(speedups),
        round_speedups=speedups,
        round_loads=tuple(run.load for run in runs),
        round_wall_s=tuple(run.result.wall_s for run in runs),
        verify_share=result.verify_share,
        draft_s=result.draft_s,
        target_s=result.target_s,
        verify_s=result.verify_s,
        wall_s=result.wall_s,
        ar_token_s=ar.wall_s / ar.generated,
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
    "rounds",
}


@dataclass(frozen=True)
class Grid:
    """A decode benchmark: methods × K × L × temperatures × drafts on a few prompts (a list, or
    the name of a built-in set: :data:`otlp.decoding.prompts.PROMPT_SETS`), timed over
    ``rounds`` interleaved rounds (:func:`run_configs`)."""

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
    rounds: int = 1

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
            and not (k > 1 and RULES.get(method) is not None and RULES[method].drafts == 1)
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

    methods = names()

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
        "rounds": lambda v: positive_int(name, v),
    }
    check = checks.get(key, _nonempty_string)
    try:
        if key == "prompts" and isinstance(value, str):
            if value not in PROMPT_SETS:
                raise ValueError(
                    f"expected a list or one of {', '.join(PROMPT_SETS)}, got {value!r}"
                )
            return PROMPT_SETS[value]
        if key in _LIST_KEYS:
            if not isinstance(value, list) or not value:
                raise ValueError("must be a non-empty list")
            items = tuple(check(v) for v in value)
            unknown = [m for m in items if key == "methods" and m not in (AUTOREGRESSIVE, *methods)]
            if unknown:
                raise ValueError(f"unknown {', '.join(unknown)}; choose from {', '.join(methods)}")
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
        "| method | draft | T | K×L | block efficiency | tokens/s | speed-up vs ar, median "
        "(min–max) | rounds | load | draft / target / verify share |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {method_text(r)} | {r.draft or '-'} | {r.temperature:g} | {r.shape} "
        f"| {r.block_efficiency:.2f} ± {se_text(r.block_efficiency_se)} | {r.tokens_per_s:.1f} "
        f"| {speedup_text(r)} | {r.rounds} | {load_text(r)} | {shares_text(r)} |"
        for r in rows
    ]
    return head + "\n".join(lines) + "\n"


def method_text(row: Row) -> str:
    """The row's method, with the draft's top-k when it has one (``gbv``, ``global_resolution
    top-100``)."""
    return row.method if row.top_k is None else f"{row.method} top-{row.top_k}"


def speedup_text(row: Row) -> str:
    """``median (min–max)``, or the median alone for ``ar`` and single rounds."""
    if row.method == AUTOREGRESSIVE:
        return "1"
    if row.rounds == 1:
        return f"{row.speedup:.2f}"
    return f"{row.speedup:.2f} ({row.speedup_low:.2f}–{row.speedup_high:.2f})"


def load_text(row: Row) -> str:
    """The 1-minute load average at the start of the row's runs: ``low–high``."""
    if row.load_low == row.load_high:
        return f"{row.load_low:.1f}"
    return f"{row.load_low:.1f}–{row.load_high:.1f}"


def shares_text(row: Row) -> str:
    """Percent of wall time drafting / in the target / verifying."""
    shares = (row.draft_share, row.target_share, row.verify_share)
    return "/".join(f"{100 * share:.0f}" for share in shares)


def cost_markdown(rows: Sequence[Row]) -> str:
    """The cost model per config: per-step means in ms, the modelled speed-up, the draft cost
    (per forward, relative to an ar token) that would make it 1, and the block efficiency that
    would make it :data:`TARGET_SPEEDUP` (at most L + 1 is reachable)."""
    head = (
        "| method | draft | T | K×L | block eff. | t(ar token) ms | t(tree) ms | t(L drafts) ms "
        f"| t(verify) ms | model speed-up | draft cost / ar token | break-even draft cost "
        f"| block eff. for {TARGET_SPEEDUP:g}× (max L + 1) |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {method_text(r)} | {r.draft or '-'} | {r.temperature:g} | {r.shape} "
        f"| {r.block_efficiency:.2f} | {1e3 * r.ar_token_s:.1f} | {1e3 * r.target_step_s:.1f} "
        f"| {1e3 * r.draft_step_s:.1f} | {1e3 * r.verify_step_s:.2f} | {r.model_speedup:.2f} "
        f"| {r.draft_ratio:.2f} | {r.breakeven_draft_ratio:.2f} "
        f"| {r.needed_block_efficiency():.2f} ({r.depth + 1}) |"
        for r in rows
        if r.method != AUTOREGRESSIVE
    ]
    return head + "\n".join(lines) + "\n"


def se_text(value: float) -> str:
    """A standard error to two decimals (0.00 when undefined: one step)."""
    return "0.00" if not np.isfinite(value) else f"{value:.2f}"
