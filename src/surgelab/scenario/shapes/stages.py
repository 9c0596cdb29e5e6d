"""Stages: k6's list of targets, each reached linearly over its duration."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from surgelab.scenario.base import Seconds
from surgelab.scenario.shapes.base import BaseShape, Level

__all__ = ["Stage", "Stages"]


class Stage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    duration: Seconds
    target: Level


class Stages(BaseShape):
    """k6's stages: move linearly to each ``target`` over its ``duration`` (paste a k6 plan)."""

    climbs = True

    type: Literal["stages"]
    start: Level = Field(0.0, description="Level before the first stage (k6's startRate / startVUs).")
    stages: list[Stage] = Field(min_length=1)

    def _points(self) -> tuple[np.ndarray, np.ndarray]:
        times = np.concatenate([[0.0], np.cumsum([s.duration for s in self.stages])])
        levels = np.array([self.start, *(s.target for s in self.stages)], dtype=float)
        return times, levels

    def level(self, t: np.ndarray) -> np.ndarray:
        times, levels = self._points()
        t = np.asarray(t, dtype=float)
        # np.interp needs increasing x; a zero-duration stage is a jump, taken as the later level.
        keep = np.concatenate([np.diff(times) > 0, [True]])
        return np.interp(t, times[keep], levels[keep])

    @property
    def natural_duration(self) -> float:
        return float(sum(s.duration for s in self.stages))

    @property
    def peak(self) -> float:
        return float(max(self.start, *(s.target for s in self.stages)))

    def describe(self) -> str:
        return " → ".join([f"{self.start:g}", *(f"{s.target:g} ({s.duration:g}s)" for s in self.stages)])
