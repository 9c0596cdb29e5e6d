"""What a sweep does, as frozen data: the levels, the hold, the stop rules, the breaking phase.

The CLI builds one from flags; tests build one directly. Validation lists every problem at
once (``SweepConfig.problems``) so a bad command line is one message, not a run that dies
at level seven.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from surgelab.conditions import Threshold

__all__ = ["SweepConfig", "StopRules", "BreakConfig"]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StopRules(_Frozen):
    """When to stop climbing: the service is past saying anything useful."""

    max_error_rate: float = Field(0.05, ge=0, le=1, description="Stop after a level whose error rate is above this.")
    slo_multiple: float = Field(3.0, gt=0, description="Stop after a level whose P99 exceeds this multiple of an SLO.")
    falling_levels: int = Field(2, ge=0, description="Stop when throughput fell this many levels in a row (0: never).")
    falling_tolerance: float = Field(0.02, ge=0, lt=1, description="A fall smaller than this fraction is noise.")
    stop_when: list[Threshold] = Field(default_factory=list, description="More conditions, e.g. 'p99(e2e) > 30s'.")


class BreakConfig(_Frozen):
    """The breaking phase: hold a multiple of the expected peak, then drop and watch recovery."""

    multiple: float = Field(gt=1, description="Break load = multiple × expected peak.")
    expected_peak: float | None = Field(None, gt=0, description="Default: the knee level, else the highest level run.")
    hold: float = Field(30.0, gt=0, description="Seconds at the break load.")
    recovery: float = Field(30.0, gt=0, description="Seconds at the recovery level after the drop.")


class SweepConfig(_Frozen):
    """A stepped test: levels of users (closed loop) or requests/s (open loop), each held."""

    mode: Literal["concurrency", "rate"] = "concurrency"
    spacing: Literal["linear", "geometric", "adaptive"] = "geometric"
    levels: list[float] | None = Field(None, description="Explicit levels (overrides start/step/factor/max).")
    start: float = Field(1.0, gt=0)
    step: float = Field(1.0, gt=0, description="Linear spacing: added per level.")
    factor: float = Field(2.0, gt=1, description="Geometric and adaptive spacing: multiplied per level.")
    max: float = Field(256.0, gt=0, description="Highest level to try.")
    max_levels: int = Field(20, ge=1, le=200, description="Bound on the number of levels, refinement included.")
    refine: int = Field(3, ge=0, le=10, description="Adaptive: extra levels placed around the coarse knee.")
    hold: float = Field(60.0, gt=0, description="Seconds each level is measured.")
    settle: float = Field(10.0, ge=0, description="Seconds at the start of each level excluded from its statistics.")
    ramp_up: float = Field(
        0.0, ge=0, description="Closed loop: each level's users start evenly spread over this time (at most settle)."
    )
    warmup: float = Field(30.0, ge=0, description="Seconds of load at the first level before the sweep (not reported).")
    sla_percentile: Literal["p50", "p90", "p95", "p99"] = "p99"
    sla_max_error_rate: float = Field(
        0.01, ge=0, le=1, description="SLA capacity: highest level under this error rate."
    )
    stop: StopRules = StopRules()
    breaking: BreakConfig | None = None

    @model_validator(mode="after")
    def _consistent(self) -> SweepConfig:
        if self.levels is not None:
            if not self.levels or any(v <= 0 for v in self.levels):
                raise ValueError("levels must be a non-empty list of numbers > 0")
        elif self.max < self.start:
            raise ValueError(f"max ({self.max:g}) must be >= start ({self.start:g})")
        if self.mode == "concurrency" and any(v != int(v) for v in (self.levels or [])):
            raise ValueError("concurrency levels must be whole numbers of users")
        if self.ramp_up and self.mode != "concurrency":
            raise ValueError("ramp_up spreads the start of a level's users: it needs mode concurrency (a closed loop)")
        if self.ramp_up > self.settle:
            raise ValueError(
                f"ramp_up ({self.ramp_up:g}s) must not exceed settle ({self.settle:g}s): users still joining would be measured"
            )
        return self

    @property
    def unit(self) -> str:
        return "users" if self.mode == "concurrency" else "req/s"
