"""The referee's statistical test: is a sampled law within total variation ε of a known law?

The test (Hoeffding over every event, the Bretagnolle–Huber–Carol argument). The outcomes are
merged into ``m`` bins (the likeliest ``m - 1`` outcomes of the target, the rest in one bin:
a function of the output, so under the null the binned law is still the target's). With
known target law ``p`` and ``N`` i.i.d. outputs of empirical law ``p̂``, the statistic is

    T = TV(p̂, p) = max over events A of (p̂(A) - p(A)),

the maximum over the ``2^m - 2`` nontrivial unions of bins. For one event, ``p̂(A)`` is a mean
of N variables in [0, 1], so Hoeffding gives ``P(p̂(A) - p(A) >= t) <= exp(-2 N t²)``;

* false alarm: under the null (the sampler follows p) a union over the events gives
  ``P(T >= t) <= (2^m - 2) exp(-2 N t²)``;
* power: if the sampler's binned law s has ``TV(s, p) >= ε``, the event A* attaining it has
  ``s(A*) - p(A*) >= ε`` and ``P(T < t) <= P(p̂(A*) - s(A*) <= -(ε - t)) <= exp(-2 N (ε - t)²)``.

For a false-alarm probability ``δ`` and a miss probability ``β`` the planned sample size and
threshold are (:func:`plan`)

    N = ⌈(√ln((2^m - 2)/δ) + √ln(1/β))² / (2 ε²)⌉,   t = √(ln((2^m - 2)/δ) / (2 N)).

Each "output" may also be a probability vector over the bins (a Rao–Blackwellised draw: the
tree protocol averages the target's completion law of each emitted prefix instead of sampling
the completion); the bounds hold unchanged, since ``p̂(A)`` is still a mean of N independent
[0, 1] variables with mean ``s(A)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from otlp.solvers.arrays import FloatArray, IntArray

MAX_BINS = 16


@dataclass(frozen=True)
class Plan:
    """A planned test: ``samples`` draws, reject when TV(p̂, p) >= ``threshold``."""

    samples: int
    threshold: float
    epsilon: float
    false_alarm: float
    miss: float
    bins: int


def events(bins: int) -> int:
    """The number of nontrivial events over ``bins`` bins: 2^m - 2 (at least 1)."""
    return max(2**bins - 2, 1)


def plan(epsilon: float, false_alarm: float, miss: float, bins: int) -> Plan:
    """The sample size and threshold detecting TV >= ``epsilon`` (see the module docstring)."""
    log_events = math.log(events(bins) / false_alarm)
    root = math.sqrt(log_events) + math.sqrt(math.log(1.0 / miss))
    samples = math.ceil(root * root / (2.0 * epsilon * epsilon))
    return Plan(samples, threshold(samples, false_alarm, bins), epsilon, false_alarm, miss, bins)


def threshold(samples: int, false_alarm: float, bins: int) -> float:
    """The smallest t with (2^m - 2) exp(-2 N t²) <= false_alarm."""
    return math.sqrt(math.log(events(bins) / false_alarm) / (2.0 * samples))


def false_alarm_bound(statistic: float, samples: int, bins: int) -> float:
    """The null's tail bound at an observed statistic: a p-value, min(1, (2^m - 2) e^{-2Nt²})."""
    return min(1.0, events(bins) * math.exp(-2.0 * samples * statistic * statistic))


def binning(target: FloatArray, max_bins: int = MAX_BINS) -> tuple[IntArray, FloatArray]:
    """Bins for a target law over outcomes 0..K-1: ``(bin of each outcome, binned target)``.

    The ``max_bins - 1`` likeliest outcomes get their own bin (ties by index), the rest share
    the last one; outcomes of zero target probability always share a bin with the rest, so
    a sampler emitting an impossible outcome moves mass into a bin whose target mass is
    known.
    """
    order = np.argsort(-target, kind="stable")
    own = order[: max_bins - 1]
    own = own[target[own] > 0]
    if own.shape[0] == target.shape[0]:
        bin_of = np.empty(target.shape[0], dtype=np.int64)
        bin_of[own] = np.arange(own.shape[0])
        return bin_of, np.asarray(target[own], dtype=np.float64)
    bin_of = np.full(target.shape[0], own.shape[0], dtype=np.int64)
    bin_of[own] = np.arange(own.shape[0])
    binned = np.bincount(bin_of, weights=target, minlength=own.shape[0] + 1)
    return bin_of, np.asarray(binned, dtype=np.float64)


def tv_statistic(empirical: FloatArray, target: FloatArray) -> float:
    """TV(p̂, p) = max over events of p̂(A) - p(A) = half the L1 distance."""
    return 0.5 * float(np.abs(empirical - target).sum())
