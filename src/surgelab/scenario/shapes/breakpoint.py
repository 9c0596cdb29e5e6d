"""Breakpoint: climb in steps until a stop condition holds."""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from surgelab.conditions import Threshold
from surgelab.scenario.base import PositiveSeconds
from surgelab.scenario.shapes.base import BaseShape, Level, StopSteps
from surgelab.scenario.shapes.step import Step

__all__ = ["Breakpoint"]


class Breakpoint(BaseShape):
    """Keep climbing in steps until a stop condition holds (or ``max`` is reached)."""

    climbs = True

    type: Literal["breakpoint"]
    start: Level
    step: Annotated[float, Field(gt=0)]
    hold: PositiveSeconds
    max: Level = Field(1e9, description="Safety cap on the level.")
    stop_when: list[Threshold] = Field(
        default_factory=lambda: [Threshold(expr="error_rate > 5%")],
        description="Thresholds that end the run when they hold over a completed step, e.g. 'p99(ttft) > 2s'.",
    )

    def _as_step(self) -> Step:
        return Step(type="step", start=self.start, step=self.step, hold=self.hold, max=max(self.max, self.start))

    def level(self, t: np.ndarray) -> np.ndarray:
        return self._as_step().level(t)

    @property
    def natural_duration(self) -> float | None:
        return self._as_step().natural_duration if self.max < 1e9 else None

    @property
    def peak(self) -> float:
        return self._as_step().peak

    @property
    def stop_steps(self) -> StopSteps:
        return StopSteps(self.hold, tuple(self.stop_when), self.start, self.step)

    def describe(self) -> str:
        until = " or ".join(t.expr for t in self.stop_when)
        return f"from {self.start:g} by {self.step:g} every {self.hold:g}s until {until}"
