"""The scenario's load: open loop (a rate) or closed loop (users), as a level or a shape over time."""

from __future__ import annotations

import enum
from typing import Literal

from pydantic import Field, model_validator

from surgelab.scenario.base import PositiveSeconds, ScenarioModel, Seconds
from surgelab.scenario.distributions import Distribution, Fixed
from surgelab.scenario.shapes import BaseShape, Shape

__all__ = ["Arrival", "Load", "DEFAULT_DURATION_S"]

DEFAULT_DURATION_S = 60.0


class Arrival(str, enum.Enum):
    CONSTANT = "constant"  # evenly spaced, 1/rate apart
    POISSON = "poisson"  # exponential gaps: independent users
    GAMMA = "gamma"  # gamma gaps with a chosen coefficient of variation: burstier or smoother
    UNIFORM = "uniform"  # the constant count at independent uniform times: inference-perf's load type "constant"


class Load(ScenarioModel):
    """Open loop (``rate``) or closed loop (``concurrency``); exactly one of the two.

    Either is a number (a steady level) or a shape: step, ramp, spike, wave, stages or
    breakpoint (see the shapes section below).
    """

    rate: Shape | None = Field(None, description="Open loop: requests per second, a number or a shape.")
    arrival: Arrival = Field(Arrival.POISSON, description="Open loop: constant, poisson, gamma or uniform arrivals.")
    cv: float = Field(1.0, gt=0, allow_inf_nan=False, description="Gamma arrivals: coefficient of variation of the gaps.")
    concurrency: Shape | None = Field(None, description="Closed loop: number of virtual users, a number or a shape.")
    think_time: Distribution = Field(Fixed(value=0.0), description="Closed loop: pause between a response and the user's next request.")
    ramp_up: Seconds = Field(
        0.0, description="Closed loop with a steady level: users start evenly spread over this time (a shape sets its own)."
    )
    duration: PositiveSeconds | None = Field(
        None, description="How long to send for; defaults to the shape's own length, or 60 s for steady and wave loads."
    )
    warmup: Seconds = Field(0.0, description="Initial period recorded but excluded from the summary.")
    max_in_flight: int = Field(1000, ge=1, description="Open loop: a request that would exceed this is dropped and counted.")
    users: int | None = Field(
        None,
        ge=1,
        description="Open loop dealt to this many users (inference-perf's sessions): request i goes to user i mod users, "
        "who sends it only once its previous answer is back. The rate holds while answers return within users ÷ rate.",
    )
    grace: Seconds = Field(10.0, description="On stop, how long in-flight requests may finish before they are cancelled.")

    @model_validator(mode="after")
    def _one_mode(self) -> Load:
        if (self.rate is None) == (self.concurrency is None):
            raise ValueError("give exactly one of rate (open loop) or concurrency (closed loop)")
        if self.users is not None and self.rate is None:
            raise ValueError("users deals an open loop's schedule out to users: give it with rate, not concurrency")
        if self.concurrency is not None and self.concurrency.sets_arrivals:
            raise ValueError(f"a {self.concurrency.type} sets arrival times: use it as rate (open loop), not concurrency")
        if self.ramp_up and (self.concurrency is None or not self.concurrency.constant):
            raise ValueError(
                "ramp_up spreads the start of a steady number of users (closed loop); "
                + ("an open loop ramps with a rate shape, e.g. {type: ramp, start, end, over}" if self.rate is not None
                   else "a concurrency shape sets when its users start")  # fmt: skip
            )
        if self.warmup >= self.planned_duration:
            raise ValueError(f"warmup ({self.warmup:g}s) must be shorter than duration ({self.planned_duration:g}s)")
        return self

    @property
    def mode(self) -> Literal["open", "closed"]:
        return "open" if self.rate is not None else "closed"

    @property
    def shape(self) -> BaseShape:
        """The level over time (requests/s or users)."""
        shape = self.rate if self.rate is not None else self.concurrency
        assert shape is not None  # exactly one is given (_one_mode)
        return shape

    @property
    def planned_duration(self) -> float:
        if self.duration is not None:
            return self.duration
        natural = self.shape.natural_duration
        return float(natural) if natural is not None else DEFAULT_DURATION_S

    def describe(self) -> str:
        unit = "req/s" if self.mode == "open" else "users"
        return f"{self.shape.describe()} {unit}"
