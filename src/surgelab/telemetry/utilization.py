"""``utilization`` in summary.json: arrival rate ÷ service capacity, as the seeds define it.

The capacity is the most requests per second the server can complete on this workload. A run
knows it only when it pushed the server that far: with requests waiting at the server on
average (its ``waiting`` gauge, scraped), what it completed is what it could — the throughput is
the capacity. Otherwise the capacity is unknown unless the scenario states it
(``telemetry.capacity``, e.g. a sweep's highest throughput), and the summary says so instead of
inventing one: dividing by the most requests seen running (as before issue 29) gave 0.45, 0.51
and 0.64 at 2, 8 and 20 req/s against a server with room for 256 sequences.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SATURATED_WAITING", "utilization"]

SATURATED_WAITING = 0.5  # requests waiting at the server on average: it ran at its capacity


def utilization(summary: dict[str, Any], roles: dict[str, Any], declared_rps: float | None) -> dict[str, Any]:
    """λ (measured requests ÷ the window), the capacity used and its source, and ρ = λ ÷ capacity."""
    duration = summary["duration_s"] or 0.0
    arrival = summary["requests"]["measured"] / duration if duration > 0 else None
    running, waiting = roles.get("running"), roles.get("waiting")
    throughput = summary["throughput"]["requests_per_s"]
    if declared_rps is not None:
        capacity, source = declared_rps, "declared: telemetry.capacity"
    elif waiting and waiting["mean"] >= SATURATED_WAITING and throughput > 0:
        capacity = throughput
        source = (f"measured: this run's throughput, with {waiting['mean']:.1f} requests waiting at the server "
                  "on average (it ran at capacity)")  # fmt: skip
    else:
        capacity = None
        seen = "no waiting gauge was scraped" if not waiting else f"{waiting['mean']:.2f} requests waited on average"
        source = (f"unknown: the run did not reach the server's capacity ({seen}); give telemetry.capacity in req/s, "
                  "e.g. the highest throughput of `surgelab sweep`")  # fmt: skip
    slots = running["max"] if running and running["max"] > 0 else None
    return {
        "arrival_rate": arrival,
        "capacity_rps": capacity,
        "capacity_source": source,
        "offered": arrival / capacity if arrival is not None and capacity else None,
        "slots": slots,  # the most requests seen running at once (not the server's limit)
        "busy_fraction": running["mean"] / slots if running and slots else None,
    }
