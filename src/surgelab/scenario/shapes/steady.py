"""Steady: one level for the whole run."""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from surgelab.scenario.shapes.base import ArrivalProcess, BaseShape

__all__ = ["Steady"]


class Steady(BaseShape):
    """One level for the whole run: a soak."""

    constant = True

    type: Literal["steady"] = "steady"
    level_: Annotated[float, Field(gt=0, allow_inf_nan=False)] = Field(alias="level")

    def level(self, t: np.ndarray) -> np.ndarray:
        return np.full(np.shape(t), self.level_, dtype=float)

    @property
    def peak(self) -> float:
        return self.level_

    def describe(self) -> str:
        return f"steady at {self.level_:g}"

    def offsets_ns(self, duration: float, arrivals: ArrivalProcess) -> np.ndarray:
        return arrivals.constant(self.level_, duration)  # a renewal process at the rate: no rescaling
