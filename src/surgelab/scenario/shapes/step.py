"""Step: the stress method's staircase."""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Field, model_validator

from surgelab.scenario.base import PositiveSeconds
from surgelab.scenario.shapes.base import BaseShape, Level

__all__ = ["Step"]


class Step(BaseShape):
    """Start, then add ``step`` every ``hold`` until ``max``: the stress method's staircase."""

    climbs = True

    type: Literal["step"]
    start: Level
    step: Annotated[float, Field(gt=0)]
    hold: PositiveSeconds
    max: Level

    @model_validator(mode="after")
    def _ordered(self) -> Step:
        if self.max < self.start:
            raise ValueError("max must be >= start")
        return self

    @property
    def steps(self) -> int:
        return int(np.floor((self.max - self.start) / self.step + 1e-9)) + 1

    def level(self, t: np.ndarray) -> np.ndarray:
        k = np.minimum(np.floor(np.asarray(t, dtype=float) / self.hold), self.steps - 1)
        return self.start + self.step * np.maximum(k, 0)

    @property
    def natural_duration(self) -> float:
        return self.steps * self.hold

    @property
    def peak(self) -> float:
        return self.start + self.step * (self.steps - 1)

    def describe(self) -> str:
        return f"{self.steps} steps from {self.start:g} by {self.step:g} every {self.hold:g}s up to {self.peak:g} (ramp {self.step / self.hold:g}/s)"
