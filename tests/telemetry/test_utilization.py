"""``utilization.offered`` is arrival rate ÷ service capacity, with the capacity it used (issue 29).

Seen before: it divided by the most requests seen running, which grows with the load itself —
0.45, 0.51 and 0.64 at 2, 8 and 20 req/s against a server with room for 256 sequences.
"""

from __future__ import annotations

import pytest

from surgelab.telemetry.diagnose import attach_telemetry


def _summary(rate: float, throughput: float) -> dict:
    """A 60 s window at ``rate`` req/s; the figures the diagnosis reads, quiet."""
    return {
        "duration_s": 60.0, "requests": {"measured": int(rate * 60), "failed": 0, "by_state": {}},
        "throughput": {"requests_per_s": throughput}, "schedule_lag_ms": {"p99": 1.0},
        "validity": {"valid": True, "max_lag_p99_ms": 50.0}, "latency_ms": {"ttft": {"p50": 10.0, "p99": 12.0}},
        "concurrency": {"mean_in_flight": rate * 0.9, "littles_law_estimate": rate * 0.9, "arrival_rate": rate,
                        "mean_latency_s": 0.9},
    }  # fmt: skip


def _roles(running_max: float, running_mean: float, waiting_mean: float) -> dict:
    gauge = {"min": 0.0, "last": 0.0, "samples": 60}
    return {"roles": {"running": {**gauge, "max": running_max, "mean": running_mean},
                      "waiting": {**gauge, "max": waiting_mean * 2, "mean": waiting_mean}}}  # fmt: skip


def test_a_server_with_room_to_spare_has_an_unknown_capacity_not_an_invented_one():
    summary = _summary(2.0, 2.0)
    attach_telemetry(summary, _roles(running_max=4, running_mean=1.8, waiting_mean=0.0))
    u = summary["utilization"]
    assert u["offered"] is None, "was 1.8 / 4 = 0.45: the most requests seen running is not a capacity"
    assert u["capacity_rps"] is None and u["capacity_source"].startswith("unknown: the run did not reach")
    assert u["arrival_rate"] == pytest.approx(2.0) and u["slots"] == 4


def test_a_declared_capacity_is_used_and_named():
    summary = _summary(20.0, 20.0)
    attach_telemetry(summary, _roles(running_max=30, running_mean=18.0, waiting_mean=0.0), capacity_rps=80.0)
    u = summary["utilization"]
    assert (u["offered"], u["capacity_rps"], u["capacity_source"]) == (
        pytest.approx(0.25),
        80.0,
        "declared: telemetry.capacity",
    )
    bare = _summary(20.0, 20.0)
    attach_telemetry(bare, {}, capacity_rps=80.0)  # no telemetry: still judged against the declared capacity
    assert bare["utilization"]["offered"] == pytest.approx(0.25) and "telemetry" not in bare


def test_a_saturated_server_measures_its_capacity():
    summary = _summary(30.0, 12.0)  # 30 arrive, 12 complete, requests pile up at the server
    attach_telemetry(summary, _roles(running_max=8, running_mean=8.0, waiting_mean=40.0))
    u = summary["utilization"]
    assert u["capacity_rps"] == 12.0 and u["capacity_source"].startswith("measured: this run's throughput")
    assert u["offered"] == pytest.approx(2.5), "above 1: arrivals outrun what it can serve"
