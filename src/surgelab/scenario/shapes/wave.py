"""Wave: a sinusoid around a mean."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from surgelab.scenario.base import PositiveSeconds, Seconds
from surgelab.scenario.shapes.base import BaseShape, Level

__all__ = ["Wave"]


class Wave(BaseShape):
    """A sinusoid around ``mean``: a daily (or faster) cycle."""

    type: Literal["wave"]
    mean: Level
    amplitude: Level
    period: PositiveSeconds
    phase: Seconds = Field(0.0, description="Time shift: the level at t is the sinusoid's value at t + phase.")

    @model_validator(mode="after")
    def _non_negative(self) -> Wave:
        if self.amplitude > self.mean:
            raise ValueError("amplitude must not exceed mean (the level would go negative)")
        return self

    def level(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        return self.mean + self.amplitude * np.sin(2 * np.pi * (t + self.phase) / self.period)

    @property
    def peak(self) -> float:
        return self.mean + self.amplitude

    def describe(self) -> str:
        return f"wave {self.mean:g} ± {self.amplitude:g} every {self.period:g}s"
