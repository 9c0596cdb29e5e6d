"""What counts as passing: per-request objectives, tiers with their own, and when a run's numbers hold."""

from __future__ import annotations

from pydantic import Field

from surgelab.scenario.base import ScenarioModel, Seconds
from surgelab.scenario.guards import Ratio

__all__ = ["Slo", "Tier", "Validity"]


class Slo(ScenarioModel):
    """Per-request service-level objectives; goodput counts requests meeting all that are set."""

    ttft: Seconds | None = Field(None, description="Time to first token, from the intended send.")
    itl: Seconds | None = Field(None, description="Bound on a request's mean inter-token latency.")
    tpot: Seconds | None = Field(None, description="Time per output token after the first.")
    e2e: Seconds | None = Field(None, description="Whole response, from the intended send.")


class Tier(ScenarioModel):
    """A customer tier with its own objectives (e.g. paid and free)."""

    slo: Slo = Field(Slo(), description="Objectives for this tier's requests; unset ones fall back to the scenario's.")


class Validity(ScenarioModel):
    """When the client itself is the limit, the run says so rather than report a wrong load."""

    max_lag_p99: Seconds = Field(
        0.05,
        description="A send later than this after its intended time is late; the run is invalid when its lag P99 is "
        "above it, which needs more than max_late_share of the sends late, and at least min_late_sends of them.",
    )
    max_late_share: Ratio = Field(
        0.01, description="Late sends above this share of all sends mark the run invalid (1%: the P99)."
    )
    min_late_sends: int = Field(
        5,
        ge=1,
        description="Fewer late sends than this never mark the run invalid: in a short or slow run one slow send is its P99.",
    )
    allow_drops: bool = Field(False, description="Dropped requests mark the run invalid unless allowed.")
