"""What counts as passing: per-request objectives, tiers with their own, and when a run's numbers hold."""

from __future__ import annotations

from pydantic import Field

from surgelab.scenario.base import ScenarioModel, Seconds

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

    max_lag_p99: Seconds = Field(0.05, description="Schedule lag P99 above this marks the run invalid.")
    allow_drops: bool = Field(False, description="Dropped requests mark the run invalid unless allowed.")
