"""The exact law of one verification call's output, and what follows from it.

A call outputs the accepted draft prefix X_1:tau followed by the correction token Y, a
sequence of length tau + 1 in 1..L + 1 ([GBV] Definition 3.1). :class:`OutputLaw` holds
its probabilities level by level. From it:

* the expected number of accepted draft tokens E[tau] (block efficiency is E[tau] + 1);
* the law of the first L + 1 tokens after the call continues with the target (the
  target-matching condition of Definition 3.1 says it equals M_b);
* the node budgets beta(x_1:i) = P(tau >= i, X_1:i = x_1:i) / M_b(x_1:i) (Definition 3.2),
  the variables of the single- and multi-path LPs (Theorems 3.3 and 4.3).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from otlp.multistep.single_path import StopLaw
from otlp.multistep.table import PrefixTable
from otlp.solvers.arrays import FloatArray


@dataclass(frozen=True)
class OutputLaw:
    """``emissions[d]`` (shape ``(V**(d+1),)``): P(output = that length-(d+1) sequence)."""

    emissions: tuple[FloatArray, ...]
    vocab_size: int

    @property
    def gamma(self) -> int:
        """Draft block length L."""
        return len(self.emissions) - 1

    def accepted_law(self) -> FloatArray:
        """P(tau = i), i = 0..L."""
        return np.array([e.sum() for e in self.emissions])

    @property
    def expected_accepted(self) -> float:
        """E[tau], the expected number of accepted draft tokens per target call."""
        law = self.accepted_law()
        return float(np.arange(law.shape[0]) @ law)

    @property
    def block_efficiency(self) -> float:
        """Tokens per target call: E[tau] + 1."""
        return self.expected_accepted + 1.0

    def prefix_mass(self, length: int) -> FloatArray:
        """P(tau >= length, X_1:length = u) for every length-``length`` prefix u."""
        rows = self.vocab_size**length
        return sum(e.reshape(rows, -1).sum(axis=1) for e in self.emissions[length:])

    def node_budgets(self, target: PrefixTable) -> tuple[FloatArray, ...]:
        """beta(u) for prefixes of length 1..L ([GBV] Definition 3.2); 0 where M_b(u) = 0."""
        out = []
        for length in range(1, self.gamma + 1):
            mb = target.joint(length)
            mass = self.prefix_mass(length)
            with np.errstate(invalid="ignore", divide="ignore"):
                out.append(np.where(mb > 0, mass / mb, 0.0))
        return tuple(out)

    def output_distribution(self, target: PrefixTable) -> FloatArray:
        """Law of the first L + 1 tokens: the output, then target sampling up to length L + 1."""
        acc = np.zeros(self.vocab_size)
        for d, emitted in enumerate(self.emissions):
            acc = acc + emitted
            if d < self.gamma:
                acc = target.extend(acc, d + 1, d + 2)
        return acc


def single_path_law(stops: StopLaw, path_mass: FloatArray, vocab: int) -> OutputLaw:
    """Aggregate per-path stop laws over all V**L paths (lexicographic order) into an
    :class:`OutputLaw`; ``path_mass`` is the law of the verified path."""
    steps = stops.stop.shape[1] - 1
    emissions = []
    for i in range(steps + 1):
        weighted = (path_mass * stops.stop[:, i])[:, None] * stops.correction[:, i]
        emissions.append(weighted.reshape(vocab**i, vocab ** (steps - i), vocab).sum(1).ravel())
    return OutputLaw(tuple(emissions), vocab)
