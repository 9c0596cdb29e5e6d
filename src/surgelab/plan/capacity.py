"""A capacity plan from a sweep: SLA capacity → fleet → artefacts, and the M/M/c cross-check.

This is the seeds' chain in one place: the sweep's per-instance SLA capacity (re-judged
with the planner's SLOs when given), the fleet for the forecast peak, the HPA target and
alert thresholds derived from the knee, and how far the measurement departs from what an
M/M/c queue with the same service time and slots would predict.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from surgelab.conditions import Threshold
from surgelab.plan.fleet import FleetInputs, FleetPlan, size_fleet
from surgelab.plan.queueing import mmc
from surgelab.sweep.capacity import sla_capacity
from surgelab.sweep.result import SweepResult

__all__ = ["CapacityPlan", "capacity_from_sweep", "mmc_check", "plan_capacity", "waiting_at"]


@dataclass(frozen=True)
class CapacityPlan:
    capacity: float  # per-instance SLA capacity used, requests/s
    capacity_source: str
    capacity_in_flight: float | None  # mean requests in flight per instance at that level
    fleet: FleetPlan
    knee: dict[str, Any] | None
    mmc: dict[str, Any] | None
    waiting_at_capacity: float | None = None  # mean requests waiting at the server at that level, if scraped

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def capacity_from_sweep(
    sweep: SweepResult, slos: list[Threshold] | None = None, max_error_rate: float | None = None
) -> dict[str, Any]:
    """The sweep's SLA capacity, or one re-judged with other SLOs / error limit; ValueError if none."""
    if slos is None and max_error_rate is None and sweep.sla_capacity is not None:
        return sweep.sla_capacity
    limit = max_error_rate if max_error_rate is not None else sweep.config.get("sla_max_error_rate", 0.01)
    judged = slos if slos is not None else [Threshold(expr=e) for e in sweep.slo]
    cap = sla_capacity(sweep.levels, judged, limit)
    if cap is None:
        rules = ", ".join(t.expr for t in judged) or "no SLO"
        raise ValueError(f"no level of the sweep meets {rules} with error rate <= {limit:.2%}: nothing to plan from")
    return cap


def mmc_check(sweep: SweepResult) -> dict[str, Any] | None:
    """M/M/c with S = mean E2E at the lowest level and c = in-flight at the knee, against the measurement."""
    rows = sweep.sorted_levels()
    knee_i = sweep.knee.get("row_index") if sweep.knee else None
    knee = next((r for r in rows if r.index == knee_i), None)
    e2e = rows[0].latency("e2e", "mean") if rows else None
    if knee is None or not e2e or not knee.mean_in_flight:
        return None
    service = e2e / 1000.0
    servers = max(1, round(knee.mean_in_flight))
    predicted = servers / service
    measured = max(r.requests_per_s for r in rows)
    out: dict[str, Any] = {
        "service_time_s": service,
        "servers": servers,
        "predicted_saturation_rps": predicted,
        "measured_plateau_rps": measured,
        "departure": measured / predicted - 1,
    }
    cap = sweep.sla_capacity
    if cap and cap["requests_per_s"] > 0:
        q = mmc(cap["requests_per_s"], service, servers)
        base_ttft = rows[0].latency("ttft", "mean")
        at_cap = next((r for r in rows if r.index == cap["index"]), None)
        ttft = at_cap.latency("ttft", "mean") if at_cap else None
        out["predicted_wait_at_capacity_s"] = q.mean_wait if math.isfinite(q.mean_wait) else None
        out["measured_wait_at_capacity_s"] = (
            (ttft - base_ttft) / 1000.0 if ttft is not None and base_ttft is not None else None
        )
    return out


def waiting_at(sweep: SweepResult, index: int) -> float | None:
    """Mean requests waiting at the server during level ``index``, when the sweep scraped them."""
    row = next((r for r in sweep.levels if r.index == index), None)
    return None if row is None else (row.telemetry.get("waiting") or {}).get("mean")


def plan_capacity(
    inputs: FleetInputs,
    capacity_source: str,
    capacity_in_flight: float | None = None,
    sweep: SweepResult | None = None,
    waiting: float | None = None,
) -> CapacityPlan:
    """Size the fleet and attach the sweep's knee and the M/M/c cross-check when there is a sweep."""
    return CapacityPlan(
        capacity=inputs.capacity,
        capacity_source=capacity_source,
        capacity_in_flight=capacity_in_flight,
        fleet=size_fleet(inputs),
        knee=sweep.knee if sweep is not None else None,
        mmc=mmc_check(sweep) if sweep is not None else None,
        waiting_at_capacity=waiting,
    )
