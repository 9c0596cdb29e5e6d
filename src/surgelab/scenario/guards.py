"""Safety: caps a scenario must stay under, and conditions that stop a run before it becomes the outage."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field

from surgelab.scenario.base import PositiveSeconds, ScenarioModel
from surgelab.units import parse_ratio

__all__ = ["Abort", "Guards", "Ratio"]

Ratio = Annotated[float, BeforeValidator(lambda v: parse_ratio(v) if isinstance(v, str) else v), Field(ge=0, le=1)]


class Abort(ScenarioModel):
    """Conditions that stop a run before it becomes the outage; each is checked on the requests that
    ended in the last ``window`` (set one to null to switch it off). The stop reason names it and
    ``surgelab run`` exits with 1."""

    error_rate: Ratio | None = Field(0.9, description="Stop when this share of the requests that ended in the window failed.")
    consecutive_failures: int | None = Field(1000, ge=1, description="Stop after this many failures in a row.")
    all_failed: int | None = Field(
        10,
        ge=1,
        description="Stop when this many requests ended and not one succeeded (at any rate: a dead target ends the run in seconds).",
    )
    p99_over_slo: float | None = Field(
        None, gt=1, allow_inf_nan=False,
        description="Stop when the window's P99 TTFT or E2E passes this multiple of its SLO (needs slo.ttft or slo.e2e).",
    )
    window: PositiveSeconds = Field(10.0, description="How far back error_rate and p99_over_slo look.")
    min_requests: int = Field(200, ge=1, description="error_rate and p99_over_slo need this many requests in the window.")


class Guards(ScenarioModel):
    """Hard caps that keep a typo from flooding a production service, and abort conditions.

    A scenario above a cap is refused at validation; raise the cap here explicitly, or lift
    every cap with ``unlimited: true`` (``surgelab run --i-know-what-i-am-doing``)."""

    max_rate: float = Field(2000.0, gt=0, allow_inf_nan=False, description="Highest open-loop rate, requests/s (phases that may overlap are added up).")
    max_concurrency: int = Field(5000, ge=1, description="Most closed-loop virtual users (phases added up).")
    max_duration: PositiveSeconds = Field(86400.0, description="Longest planned run.")
    unlimited: bool = Field(False, description="Lift the three caps (abort conditions still apply).")
    abort: Abort = Abort()
    worker_loss: Literal["continue", "stop"] = Field(
        "continue",
        description="When a worker process or Ray actor dies mid-run: the others go on with their shares "
        "(continue) or the run stops (stop). Either way its requests are recorded as lost and the run is invalid.",
    )
