"""Arrival processes for open-loop load: intended send times generated up front from a seed.

The whole schedule is an array of offsets in seconds, built before the first request, so it
is reproducible, can be previewed, and can be split between workers by index.
"""

from __future__ import annotations

import enum

import numpy as np

__all__ = ["Arrival", "arrival_offsets"]


class Arrival(str, enum.Enum):
    CONSTANT = "constant"  # evenly spaced, 1/rate apart
    POISSON = "poisson"  # exponential gaps: independent users
    GAMMA = "gamma"  # gamma gaps with a chosen coefficient of variation: burstier or smoother


def arrival_offsets(
    rate: float,
    duration: float,
    arrival: Arrival,
    rng: np.random.Generator,
    cv: float = 1.0,
) -> np.ndarray:
    """Intended send offsets (seconds, ascending, all < ``duration``) at a constant mean rate.

    Gamma gaps with shape k = 1/cv² and scale cv²/rate have mean 1/rate and the requested
    coefficient of variation; cv = 1 is Poisson, cv < 1 smoother, cv > 1 burstier.
    """
    if rate <= 0 or duration <= 0:
        return np.empty(0)
    expected = rate * duration
    if arrival is Arrival.CONSTANT:
        return np.arange(int(np.ceil(expected - 1e-9))) / rate
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
    # The first arrival comes one gap after zero for a renewal process; start the clock at
    # zero instead so a run does not open with an idle gap.
    offsets = offsets - offsets[0] if len(offsets) else offsets
    return offsets[offsets < duration]
