"""Load shapes: the planned level (requests/s in open loop, users in closed loop) over time.

Each shape is frozen scenario data with three things the rest of surgelab needs without
sending anything: ``level(t)`` (vectorised), ``natural_duration`` (None when the shape goes
on for as long as it is run) and ``peak``. The same shapes drive an arrival rate or a
number of users; the scenario decides which.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from surgelab.conditions import Threshold
from surgelab.files import scenario_path
from surgelab.traces import ReplayPlan, read_trace_cached, replay_plan
from surgelab.units import parse_duration

__all__ = [
    "Shape", "Steady", "Step", "Ramp", "Spike", "Wave", "Stages", "Stage", "Breakpoint", "Replay", "as_shape",
]  # fmt: skip

Seconds = Annotated[float, BeforeValidator(parse_duration), Field(ge=0)]
PositiveSeconds = Annotated[float, BeforeValidator(parse_duration), Field(gt=0)]
Level = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class _Shape(BaseModel):
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


class Steady(_Shape):
    """One level for the whole run: a soak."""

    type: Literal["steady"] = "steady"
    level_: Annotated[float, Field(gt=0, allow_inf_nan=False)] = Field(alias="level")

    def level(self, t: np.ndarray) -> np.ndarray:
        return np.full(np.shape(t), self.level_, dtype=float)

    @property
    def peak(self) -> float:
        return self.level_

    def describe(self) -> str:
        return f"steady at {self.level_:g}"


class Step(_Shape):
    """Start, then add ``step`` every ``hold`` until ``max``: the stress method's staircase."""

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


class Ramp(_Shape):
    """Linear from ``start`` to ``end`` over ``over``, then held at ``end``."""

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


class Spike(_Shape):
    """A base load, a linear rise to a peak, a hold, a linear decay: the lunch rush."""

    type: Literal["spike"]
    base: Level
    peak_: Level = Field(alias="peak")
    at: Seconds = Field(description="When the rise starts.")
    rise: Seconds = 0.0
    hold: Seconds = 0.0
    decay: Seconds = 0.0
    after: Seconds = Field(0.0, description="Base load kept after the decay (sets the natural duration).")

    def level(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        t1, t2, t3 = self.at + self.rise, self.at + self.rise + self.hold, self.at + self.rise + self.hold + self.decay
        span = self.peak_ - self.base
        up = np.clip((t - self.at) / self.rise, 0, 1) if self.rise > 0 else (t >= self.at).astype(float)
        down = np.clip((t - t2) / self.decay, 0, 1) if self.decay > 0 else (t >= t3).astype(float)
        level = self.base + span * up
        return np.where(t >= t2, self.base + span * (1 - down), np.where(t >= t1, self.peak_, level))

    @property
    def natural_duration(self) -> float:
        return self.at + self.rise + self.hold + self.decay + self.after

    @property
    def peak(self) -> float:
        return max(self.base, self.peak_)

    def describe(self) -> str:
        return f"{self.base:g} rising to {self.peak_:g} at {self.at:g}s (rise {self.rise:g}s, hold {self.hold:g}s, decay {self.decay:g}s)"


class Wave(_Shape):
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


class Stage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    duration: Seconds
    target: Level


class Stages(_Shape):
    """k6's stages: move linearly to each ``target`` over its ``duration`` (paste a k6 plan)."""

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


class Breakpoint(_Shape):
    """Keep climbing in steps until a stop condition holds (or ``max`` is reached)."""

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

    def describe(self) -> str:
        until = " or ".join(t.expr for t in self.stop_when)
        return f"from {self.start:g} by {self.step:g} every {self.hold:g}s until {until}"


class Replay(_Shape):
    """Arrival times (and by default request lengths) taken from a recorded trace; open loop only."""

    type: Literal["replay"]
    trace: str = Field(description="Trace or dataset file; a relative path is relative to the scenario file.")
    format: Literal["auto", "azure", "burstgpt", "mooncake", "lengths", "jsonl", "sharegpt", "csv"] = "auto"
    columns: dict[str, str] = Field(default_factory=dict, description="Column mapping for custom files (docs/traces.md).")
    speed: Annotated[float, Field(gt=0, allow_inf_nan=False)] = Field(1.0, description="2 halves every gap.")
    rate: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = Field(None, description="Rescale to this mean rate (overrides speed).")
    start: Seconds = Field(0.0, description="Window start in trace time.")
    end: Seconds | None = Field(None, description="Window end in trace time (default: the end of the trace).")
    lengths: bool = Field(True, description="Take prompt and output lengths (and Mooncake prefix blocks) from the trace.")
    skip_failed: bool = Field(False, description="Leave out rows the trace marks as failed (BurstGPT's zero-token responses).")
    on_bad_row: Literal["skip", "fail"] = "skip"
    block_size: int = Field(512, ge=1, description="Prompt tokens per Mooncake hash id.")

    @field_validator("trace")
    @classmethod
    def _resolve(cls, value: str, info: ValidationInfo) -> str:
        return scenario_path(value, info, "trace file")

    def load(self) -> ReplayPlan:
        """The trace read and windowed (cached: the same file is read once per process)."""
        columns = tuple(sorted(self.columns.items()))
        trace = read_trace_cached(self.trace, self.format, columns, self.on_bad_row, self.block_size)
        return replay_plan(trace, self.speed, self.start, self.end, self.rate, self.skip_failed)

    def level(self, t: np.ndarray) -> np.ndarray:
        """The replay's rate over time, counted in one-second bins."""
        offsets = self.load().offsets_ns / 1e9
        t = np.asarray(t, dtype=float)
        if not len(offsets):
            return np.zeros(np.shape(t))
        counts = np.bincount(offsets.astype(np.int64))
        bins = np.clip(t.astype(np.int64), 0, len(counts) - 1)
        return np.where((t >= 0) & (t < len(counts)), counts[bins], 0.0).astype(float)

    @property
    def natural_duration(self) -> float:
        offsets = self.load().offsets_ns
        return float(offsets[-1]) / 1e9 + 1e-3 if len(offsets) else 1e-3

    @property
    def peak(self) -> float:
        return float(np.max(self.level(np.arange(0, self.natural_duration + 1)))) if self.natural_duration else 0.0

    def describe(self) -> str:
        plan = self.load()
        how = f"at {self.rate:g} req/s mean" if self.rate else f"at speed {self.speed:g}"
        return f"replay of {Path(self.trace).name} ({len(plan.rows):,} requests over {self.natural_duration:,.0f}s, {how})"


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
