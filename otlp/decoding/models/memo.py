"""A tree model that evaluates each prefix once: repeated first steps of a prompt, cheaply.

Measuring a rule at the first step of a prompt drafts the same few shallow prefixes again
and again (the root, the likely first tokens): :class:`MemoizedTreeLM` wraps any
:class:`~otlp.decoding.models.base.TreeModel` and remembers the law after every prefix (a
prompt and the drafted tokens below it) it has returned, up to ``capacity`` laws (the least
recently used go first: a law over SmolLM2's 49,152 tokens is 393 kB). Its sessions answer
:meth:`~otlp.decoding.models.base.TreeSession.forward` from that memo and send the misses of
one call to the wrapped model at once: as the nodes of one tree below the prompt, in a session
of the wrapped model kept open on that prompt (a KV cache holds the prompt once, and a node's
ancestors are fed before it; the session is reopened past ``max_nodes`` nodes or on another
prompt).

``top_k`` restricts every law to its top k tokens
(:func:`otlp.verification.drafting.restrict_top_k`): the law a decoder drafts from when it
drafts from the draft's top k ([GR] Appendix N), so that a bound and a Monte Carlo estimate
see the same drafting law.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from otlp.args import positive_int
from otlp.decoding.models.base import TreeModel, TreeSession, check_model
from otlp.solvers.arrays import FloatArray, IntArray

Prefix = tuple[int, ...]


class MemoizedTreeLM:
    """``model`` with a memo of its laws by prefix (see the module docstring).

    ``calls`` counts the forwards sent to ``model`` and ``evaluated`` the laws it computed
    (the prompt's own law included): what the memo did not save."""

    def __init__(
        self,
        model: TreeModel,
        *,
        top_k: int | None = None,
        capacity: int = 1024,
        max_nodes: int = 1024,
    ) -> None:
        check_model("model", model)
        self.model = model
        self.vocab_size = int(model.vocab_size)
        self.top_k = None if top_k is None else positive_int("top_k", top_k)
        self.capacity = positive_int("capacity", capacity)
        self.max_nodes = positive_int("max_nodes", max_nodes)
        suffix = "" if self.top_k is None else f", top {self.top_k}"
        self.name = f"{model.name} (memoised{suffix})"
        self.calls = 0
        self.evaluated = 0
        self._memo: OrderedDict[Prefix, FloatArray] = OrderedDict()
        self._open: _OpenSession | None = None

    def session(self, prompts: Sequence[Sequence[int]]) -> MemoSession:
        return MemoSession(self, prompts)

    def laws(self, context: Sequence[int], paths: Sequence[Sequence[int]]) -> FloatArray:
        """Laws after ``context`` followed by each of ``paths`` (``()``: the context's own),
        ``(len(paths), V)``; the misses go to the wrapped model in one forward."""
        context = tuple(int(t) for t in context)
        keys = [tuple(int(t) for t in path) for path in paths]
        found: dict[Prefix, FloatArray] = {}
        for path in dict.fromkeys(keys):
            law = self._memo.get(context + path)
            if law is not None:
                self._memo.move_to_end(context + path)
                found[path] = law
        missing = [path for path in dict.fromkeys(keys) if path not in found]
        if missing:
            computed = self._evaluate(context, missing)
            found.update(computed)
            for path, law in computed.items():
                self._memo[context + path] = law
                self._memo.move_to_end(context + path)
            while len(self._memo) > self.capacity:
                self._memo.popitem(last=False)
        out = np.empty((len(keys), self.vocab_size))
        for i, path in enumerate(keys):
            out[i] = found[path]
        return out

    def _evaluate(self, context: Prefix, missing: list[Prefix]) -> dict[Prefix, FloatArray]:
        """The wrapped model's laws after ``context + path`` for each missing path and for the
        ancestors fed with them: the paths and their ancestors not yet in the open session,
        shortest first, as one tree."""
        out: dict[Prefix, FloatArray] = {}
        opened = self._session(context, sum(len(path) for path in missing))
        if () in missing:
            out[()] = opened.root
        wanted = {path for path in missing if path}
        feed: set[Prefix] = set(wanted)
        for path in wanted:
            feed.update(path[:d] for d in range(1, len(path)) if path[:d] not in opened.nodes)
        if not feed:
            return out
        order = sorted(feed, key=lambda path: (len(path), path))
        ids: dict[Prefix, int] = {}
        parents = []
        for path in order:
            parent = path[:-1]
            parents.append(-1 if not parent else ids.get(parent, opened.nodes.get(parent, -1)))
            ids[path] = opened.fed + len(ids)
        tokens = np.array([[path[-1] for path in order]], dtype=np.int64)
        laws = opened.session.forward(
            tokens, np.array(parents, dtype=np.int64), np.zeros(1, dtype=np.int64)
        )
        self.calls += 1
        self.evaluated += len(order)
        opened.nodes.update(ids)
        opened.fed += len(order)
        for j, path in enumerate(order):  # the ancestors' laws too: computed anyway
            out[path] = self._restricted(laws[0, 1 + j])
        return out

    def _session(self, context: Prefix, feed: int) -> _OpenSession:
        """The wrapped model's session on ``context``, reopened for another context or when
        ``feed`` more nodes would take it past ``max_nodes``."""
        opened = self._open
        if opened is not None and opened.context == context and opened.fed + feed <= self.max_nodes:
            return opened
        session = self.model.session([list(context)])
        empty = np.zeros((1, 0), dtype=np.int64)
        root = session.forward(empty, np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64))
        self.calls += 1
        self.evaluated += 1
        self._open = _OpenSession(context, session, self._restricted(root[0, 0]))
        return self._open

    def _restricted(self, law: FloatArray) -> FloatArray:
        law = np.asarray(law, dtype=np.float64)
        if self.top_k is None or self.top_k >= law.shape[0]:
            return law.copy()
        from otlp.verification.drafting import restrict_top_k

        return restrict_top_k(law[None, :], self.top_k)[0]

    def __repr__(self) -> str:
        return f"MemoizedTreeLM({self.name}, {len(self._memo)} laws)"


class _OpenSession:
    """A session of the wrapped model on one context: its root law, the node id of every
    path fed to it, the number of nodes fed."""

    def __init__(self, context: Prefix, session: TreeSession, root: FloatArray) -> None:
        self.context, self.session, self.root = context, session, root
        self.nodes: dict[Prefix, int] = {}
        self.fed = 0


class MemoSession:
    """Committed contexts of B rows answered from a :class:`MemoizedTreeLM`'s memo. A node
    marked absent (``-1``, or below one) gets its row's root law: its law is unspecified."""

    def __init__(self, model: MemoizedTreeLM, prompts: Sequence[Sequence[int]]) -> None:
        self.model = model
        self.contexts = [[int(t) for t in prompt] for prompt in prompts]
        self._paths: list[list[Prefix | None]] = [[] for _ in self.contexts]
        self._parents: list[int] = []

    def forward(self, tokens: IntArray, parents: IntArray, rows: IntArray) -> FloatArray:
        tokens = np.asarray(tokens, dtype=np.int64).reshape(len(rows), len(parents))
        first = len(self._parents)
        self._parents.extend(int(p) for p in parents)
        new: list[list[Prefix | None]] = []
        for r, row in enumerate(rows):
            known = self._paths[row]
            for j, token in enumerate(tokens[r]):
                parent = self._parents[first + j]
                above: Prefix | None = () if parent < 0 else known[parent]
                known.append(None if above is None or token < 0 else (*above, int(token)))
            new.append(known[first:])
        out = np.empty((len(rows), 1 + tokens.shape[1], self.model.vocab_size))
        by_context: dict[Prefix, list[int]] = {}
        for r, row in enumerate(rows):
            by_context.setdefault(tuple(self.contexts[row]), []).append(r)
        for context, members in by_context.items():  # one memo call per distinct context
            paths = list(dict.fromkeys(p for r in members for p in new[r] if p is not None))
            laws = self.model.laws(context, [(), *paths])
            at = {path: 1 + i for i, path in enumerate(paths)}
            for r in members:
                out[r, 0] = laws[0]
                for j, path in enumerate(new[r]):
                    out[r, 1 + j] = laws[0 if path is None else at[path]]
        return out

    def commit(
        self, rows: IntArray, tokens: Sequence[Sequence[int]], nodes: Sequence[Sequence[int]]
    ) -> None:
        for r, row in enumerate(rows):
            self.contexts[row].extend(int(t) for t in tokens[r])
        self._paths = [[] for _ in self.contexts]
        self._parents = []

    def context(self, row: int) -> list[int]:
        return list(self.contexts[row])
