"""Ramp: linear from one level to another, then held."""

from __future__ import annotations

from typing import Literal

import numpy as np

from surgelab.scenario.base import PositiveSeconds
from surgelab.scenario.shapes.base import BaseShape, Level

__all__ = ["Ramp"]


class Ramp(BaseShape):
    """Linear from ``start`` to ``end`` over ``over``, then held at ``end``."""

    climbs = True

    type: Literal["ramp"]
    start: Level
    end: Level
    over: PositiveSeconds

    def level(self, t: np.ndarray) -> np.ndarray:
        frac = np.clip(np.asarray(t, dtype=float) / self.over, 0, 1)
        return self.start + (self.end - self.start) * frac

    @property
    def natural_duration(self) -> float:
        return self.over

    @property
    def peak(self) -> float:
        return max(self.start, self.end)

    def describe(self) -> str:
        return f"linear from {self.start:g} to {self.end:g} over {self.over:g}s"
