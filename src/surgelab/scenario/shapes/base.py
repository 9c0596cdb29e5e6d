"""The shape interface, and the level type every shape is written in.

A shape answers, without sending anything, everything the rest of surgelab asks of a load
over time: its level, length, peak and summary; its open-loop send times (``offsets_ns``,
drawn from the arrival process it is handed); when its closed-loop users start and whether
its level gates them (``constant``, ``user_start_ns``); whether it owns stop steps
(``stop_steps``) or request lengths (``recorded``). The planner, the simulator, the stop
rules and the analysis ask the shape; none of them tests which shape it is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, ClassVar, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from surgelab.conditions import Threshold
from surgelab.traces import ReplayPlan
from surgelab.units import SECOND

__all__ = ["ArrivalProcess", "BaseShape", "Level", "Recorded", "StopSteps"]

Level = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class ArrivalProcess(Protocol):
    """The phase's seeded arrival process (``load.arrival`` and ``cv``; ``surgelab.load.arrivals``):
    send offsets in integer nanoseconds from the phase start, ascending, all before ``duration`` s."""

    def constant(self, rate: float, duration: float) -> np.ndarray: ...

    def shaped(self, level: Callable[[np.ndarray], np.ndarray], duration: float) -> np.ndarray: ...


@dataclass(frozen=True)
class StopSteps:
    """A climb in steps of ``hold`` s that ends the run after the first step over which a condition held."""

    hold: float
    conditions: tuple[Threshold, ...]
    start: float
    step: float

    def level(self, step: int) -> float:
        """The level of step ``step`` (from 0), as the stop reason names it."""
        return self.start + self.step * step


@dataclass(frozen=True)
class Recorded:
    """Requests whose lengths a trace gives, in send order: the workload samples these, not its own."""

    plan: ReplayPlan
    block_size: int  # prompt tokens per prefix hash id (Mooncake)


class BaseShape(BaseModel):
    """What every shape answers without sending anything; the defaults fit a level that varies over time."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    type: str  # its name in the registry: each shape narrows it to its Literal

    constant: ClassVar[bool] = False
    """The level is the same all the phase long: every user is active throughout (no gating by the
    level), ``load.ramp_up`` may spread their start, and a phase of them starts as one burst."""
    climbs: ClassVar[bool] = False
    """It rises from a low level to its peak: the load's warm-up is the time the target has to warm."""
    sets_arrivals: ClassVar[bool] = False
    """It sets its own send times (a recorded trace), not a level: open loop only, never users."""

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

    def offsets_ns(self, duration: float, arrivals: ArrivalProcess) -> np.ndarray:
        """The open-loop send times over ``duration`` s, in integer ns from the phase start: the
        arrival process following the level (by time rescaling)."""
        return arrivals.shaped(self.level, duration)

    def user_start_ns(self, user: int, users: int, ramp_up: float) -> int:
        """When closed-loop user ``user`` of ``users`` first gets ready, in ns from the phase start:
        at once where the level gates the users; spread evenly over ``ramp_up`` s where it is constant."""
        return int(ramp_up * SECOND * user / users) if self.constant else 0

    @property
    def stop_steps(self) -> StopSteps | None:
        """The steps at whose end the stop rules judge the run (a breakpoint); None: it has none."""
        return None

    def recorded(self) -> Recorded | None:
        """The requests it replays with their own lengths; None: the workload gives the lengths."""
        return None
