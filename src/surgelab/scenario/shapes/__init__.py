"""Load shapes: the planned level (requests/s in open loop, users in closed loop) over time.

Each shape is frozen scenario data with three things the rest of surgelab needs without
sending anything: ``level(t)`` (vectorised), ``natural_duration`` (None when the shape goes
on for as long as it is run) and ``peak``. The same shapes drive an arrival rate or a
number of users; the scenario decides which.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from surgelab.scenario.shapes.base import BaseShape, Level
from surgelab.scenario.shapes.breakpoint import Breakpoint
from surgelab.scenario.shapes.ramp import Ramp
from surgelab.scenario.shapes.replay import Replay
from surgelab.scenario.shapes.spike import Spike
from surgelab.scenario.shapes.stages import Stage, Stages
from surgelab.scenario.shapes.steady import Steady
from surgelab.scenario.shapes.step import Step
from surgelab.scenario.shapes.wave import Wave

__all__ = [
    "Shape", "BaseShape", "Level", "Steady", "Step", "Ramp", "Spike", "Wave", "Stages", "Stage", "Breakpoint", "Replay",
    "as_shape",
]  # fmt: skip


def as_shape(value: Any) -> Any:
    """A bare number is a steady level; anything else must be a shape mapping."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {"type": "steady", "level": value}
    if not isinstance(value, dict):
        kinds = "steady, step, ramp, spike, wave, stages, breakpoint, replay"
        raise ValueError(f"expected a number or a shape mapping with type: one of {kinds}")
    return value


Shape = Annotated[
    Steady | Step | Ramp | Spike | Wave | Stages | Breakpoint | Replay,
    Field(discriminator="type"),
    BeforeValidator(as_shape),
]
"""A level over time; a bare number means steady."""
