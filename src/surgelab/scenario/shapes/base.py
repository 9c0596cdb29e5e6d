"""The shape interface, and the level type every shape is written in."""

from __future__ import annotations

from typing import Annotated

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

__all__ = ["BaseShape", "Level"]

Level = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class BaseShape(BaseModel):
    """What every shape answers without sending anything: its level over time, length, peak and summary."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def level(self, t: np.ndarray) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError

    @property
    def natural_duration(self) -> float | None:
        return None

    @property
    def peak(self) -> float:  # pragma: no cover - interface
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - interface
        raise NotImplementedError
