"""Arrival processes for open-loop load: intended send times generated up front from a seed.

The whole schedule is an array of offsets in seconds, built before the first request, so it
is reproducible, can be previewed, and can be split between workers by index.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from surgelab.scenario.load import Arrival
from surgelab.units import SECOND

__all__ = ["SeededArrivals", "arrival_offsets", "shaped_offsets"]


def arrival_offsets(
    rate: float,
    duration: float,
    arrival: Arrival,
    rng: np.random.Generator,
    cv: float = 1.0,
    start_at_zero: bool = True,
) -> np.ndarray:
    """Intended send offsets (seconds, ascending, all < ``duration``) at a constant mean rate.

    Gamma gaps with shape k = 1/cv² and scale cv²/rate have mean 1/rate and the requested
    coefficient of variation; cv = 1 is Poisson, cv < 1 smoother, cv > 1 burstier.

    Uniform: the count a constant schedule sends, at independent uniform times over the
    duration — a Poisson process given its count. It is what inference-perf sends for its
    load type ``constant`` (exponential gaps scaled to fill the stage exactly), so a run of
    that tool is reproduced with ``uniform``, not with evenly spaced ``constant`` arrivals.
    """
    if rate <= 0 or duration <= 0:
        return np.empty(0)
    expected = rate * duration
    count = int(np.ceil(expected - 1e-9))
    if arrival is Arrival.CONSTANT:
        return np.arange(count) / rate
    if arrival is Arrival.UNIFORM:  # with start_at_zero the first at zero, the others uniform after it
        first = [0.0] if start_at_zero and count else []
        return np.concatenate([first, np.sort(rng.uniform(0.0, duration, count - len(first)))])
    # Draw gaps in blocks until the horizon is passed; the margin makes one block the norm.
    chunk = int(expected + 6 * np.sqrt(expected) * max(cv, 1.0) + 16)
    pieces, total = [], 0.0
    while total < duration:
        if arrival is Arrival.POISSON:
            gaps = rng.exponential(1.0 / rate, size=chunk)
        else:
            shape = 1.0 / (cv * cv)
            gaps = rng.gamma(shape, 1.0 / (rate * shape), size=chunk)
        times = total + np.cumsum(gaps)
        pieces.append(times)
        total = float(times[-1])
    offsets = np.concatenate(pieces)
    # The first arrival comes one gap after zero for a renewal process; by default start the
    # clock at zero instead so a run does not open with an idle gap.
    if start_at_zero and len(offsets):
        offsets = offsets - offsets[0]
    return offsets[offsets < duration]


def shaped_offsets(
    level: Callable[[np.ndarray], np.ndarray],
    duration: float,
    arrival: Arrival,
    rng: np.random.Generator,
    cv: float = 1.0,
    resolution: float = 0.001,
) -> np.ndarray:
    """Intended offsets (seconds) for a rate that varies in time, by time rescaling.

    With Λ(t) = ∫₀ᵗ λ(s) ds, a process with unit mean gaps in Λ-time mapped back through Λ⁻¹
    has rate λ(t): a unit-rate Poisson process becomes the non-homogeneous Poisson process
    (exactly, as thinning would give), a gamma renewal keeps its burstiness relative to the
    local rate, and evenly spaced points give deterministic arrivals. Λ is integrated with
    the trapezoid rule on a grid of ``resolution`` seconds (coarsened for long runs).
    """
    if duration <= 0:
        return np.empty(0)
    steps = int(np.ceil(duration / resolution))
    if steps > 4_000_000:
        steps = 4_000_000
    grid = np.linspace(0.0, duration, steps + 1)
    rates = np.maximum(np.asarray(level(grid), dtype=float), 0.0)
    cumulative = np.concatenate([[0.0], np.cumsum((rates[1:] + rates[:-1]) / 2 * np.diff(grid))])
    total = float(cumulative[-1])
    if total <= 0:
        return np.empty(0)
    unit = arrival_offsets(1.0, total, arrival, rng, cv=cv, start_at_zero=False)
    if arrival is Arrival.CONSTANT:
        unit = unit + 0.5  # mid-interval, so a level that starts at zero does not fire at t=0
        unit = unit[unit < total]
    # Λ is non-decreasing; where it is flat (rate 0) interp lands on the first such grid point.
    keep = np.concatenate([[True], np.diff(cumulative) > 0])
    return np.interp(unit, cumulative[keep], grid[keep])


@dataclass
class SeededArrivals:
    """A phase's arrival process, handed to its shape (``BaseShape.offsets_ns``): the shape says
    whether the rate is constant or follows its level, this draws the send times from the seed."""

    arrival: Arrival
    rng: np.random.Generator
    cv: float = 1.0

    def constant(self, rate: float, duration: float) -> np.ndarray:
        return _ns(arrival_offsets(rate, duration, self.arrival, self.rng, cv=self.cv))

    def shaped(self, level: Callable[[np.ndarray], np.ndarray], duration: float) -> np.ndarray:
        return _ns(shaped_offsets(level, duration, self.arrival, self.rng, cv=self.cv))


def _ns(offsets: np.ndarray) -> np.ndarray:
    return np.round(offsets * SECOND).astype(np.int64)
