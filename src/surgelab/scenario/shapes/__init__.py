"""Load shapes: the planned level (requests/s in open loop, users in closed loop) over time.

Each shape is frozen scenario data, one per module, answering what the rest of surgelab needs
without sending anything (``base.BaseShape``): its level over time (vectorised), natural
duration, peak and summary, and how it is planned: its open-loop send times, its users'
starts, its stop steps. The same shapes drive an arrival rate or a number of users; the
scenario decides which. ``SHAPES`` lists them by name: a new shape is its module and one line
there (docs/architecture.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from surgelab.scenario.shapes.base import ArrivalProcess, BaseShape, Level, Recorded, StopSteps
from surgelab.scenario.shapes.breakpoint import Breakpoint
from surgelab.scenario.shapes.ramp import Ramp
from surgelab.scenario.shapes.registry import ShapeRegistry
from surgelab.scenario.shapes.replay import Replay
from surgelab.scenario.shapes.spike import Spike
from surgelab.scenario.shapes.stages import Stage, Stages
from surgelab.scenario.shapes.steady import Steady
from surgelab.scenario.shapes.step import Step
from surgelab.scenario.shapes.wave import Wave

__all__ = [
    "SHAPES", "Shape", "ShapeRegistry", "BaseShape", "ArrivalProcess", "Level", "Recorded", "StopSteps",
    "Steady", "Step", "Ramp", "Spike", "Wave", "Stages", "Stage", "Breakpoint", "Replay",
]  # fmt: skip

SHAPES = ShapeRegistry(Steady, Step, Ramp, Spike, Wave, Stages, Breakpoint, Replay)

if TYPE_CHECKING:
    Shape: TypeAlias = BaseShape
else:
    Shape = SHAPES.union()
    """A level over time, one of ``SHAPES`` by its ``type``; a bare number means steady."""
