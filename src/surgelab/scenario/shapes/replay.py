"""Replay: arrival times (and lengths) from a recorded trace."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, ValidationInfo, field_validator

from surgelab.files import scenario_path
from surgelab.scenario.base import Seconds
from surgelab.scenario.shapes.base import ArrivalProcess, BaseShape, Recorded
from surgelab.traces import ReplayPlan, Trace, read_trace_cached, replay_plan
from surgelab.units import SECOND

__all__ = ["Replay"]


class Replay(BaseShape):
    """Arrival times (and by default request lengths) taken from a recorded trace; open loop only."""

    sets_arrivals = True

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

    def read(self) -> Trace:
        """The trace file's rows (cached: the same file is read once per process)."""
        columns = tuple(sorted(self.columns.items()))
        return read_trace_cached(self.trace, self.format, columns, self.on_bad_row, self.block_size)

    def load(self) -> ReplayPlan:
        """The trace read and windowed."""
        return replay_plan(self.read(), self.speed, self.start, self.end, self.rate, self.skip_failed)

    def offsets_ns(self, duration: float, arrivals: ArrivalProcess) -> np.ndarray:
        """The trace's own send times within ``duration``: no arrival process is drawn."""
        offsets_ns = self.load().offsets_ns
        return offsets_ns[offsets_ns < int(duration * SECOND)]

    def recorded(self) -> Recorded | None:
        return Recorded(self.load(), self.block_size) if self.lengths else None

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
