"""Spike: a base load, a rise to a peak, a hold and a decay."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from surgelab.scenario.base import Seconds
from surgelab.scenario.shapes.base import BaseShape, Level

__all__ = ["Spike"]


class Spike(BaseShape):
    """A base load, a linear rise to a peak, a hold, a linear decay: the lunch rush."""

    type: Literal["spike"]
    base: Level
    peak_: Level = Field(alias="peak")
    at: Seconds = Field(description="When the rise starts.")
    rise: Seconds = 0.0
    hold: Seconds = 0.0
    decay: Seconds = 0.0
    after: Seconds = Field(0.0, description="Base load kept after the decay (sets the natural duration).")

    def level(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        t1, t2, t3 = self.at + self.rise, self.at + self.rise + self.hold, self.at + self.rise + self.hold + self.decay
        span = self.peak_ - self.base
        up = np.clip((t - self.at) / self.rise, 0, 1) if self.rise > 0 else (t >= self.at).astype(float)
        down = np.clip((t - t2) / self.decay, 0, 1) if self.decay > 0 else (t >= t3).astype(float)
        level = self.base + span * up
        return np.where(t >= t2, self.base + span * (1 - down), np.where(t >= t1, self.peak_, level))

    @property
    def natural_duration(self) -> float:
        return self.at + self.rise + self.hold + self.decay + self.after

    @property
    def peak(self) -> float:
        return max(self.base, self.peak_)

    def describe(self) -> str:
        return f"{self.base:g} rising to {self.peak_:g} at {self.at:g}s (rise {self.rise:g}s, hold {self.hold:g}s, decay {self.decay:g}s)"
