"""Breakpoint load: stop at the end of the first step where a stop condition held, else climb to max."""

from __future__ import annotations

import numpy as np

from surgelab.metrics.store import read_records
from surgelab.units import SECOND


def breakpoint_load(stop_when: list[str], **shape) -> dict:
    return {"rate": {"type": "breakpoint", "stop_when": stop_when, **shape}, "arrival": "constant", "duration": None}


def test_stops_after_the_first_step_that_breaks_the_slo(timed_server, scenario_for, run, tmp_path):
    load = breakpoint_load(["p50(ttft) > 100ms"], start=5, step=5, hold="1s", max=20)
    result = run(scenario_for(timed_server.url, load=load), tmp_path / "run")
    assert result.stop_reason == "breakpoint: 'p50(ttft) > 100ms' held at 5 req/s (step 1)"
    assert result.summary["stop_reason"] == result.stop_reason
    table = read_records(result.run_dir)
    intended = np.array(table["intended_ns"].to_pylist()) / SECOND
    assert len(intended) == 5 and intended.max() < 1.0  # nothing of step 2 was sent
    assert set(table["state"].to_pylist()) == {"ok"}  # what was in flight finished in the grace period


def test_a_condition_that_never_holds_climbs_to_max(timed_server, scenario_for, run, tmp_path):
    load = breakpoint_load(["p50(ttft) > 10s", "error_rate > 50%"], start=4, step=4, hold="0.5s", max=13)
    s = scenario_for(timed_server.url, load=load)
    assert s.load.planned_duration == 1.5  # 4, 8, 12 req/s; 16 would pass max
    result = run(s, tmp_path / "run")
    assert result.stop_reason == "completed"
    intended = np.array(read_records(result.run_dir)["intended_ns"].to_pylist()) / SECOND
    assert np.histogram(intended, [0, 0.5, 1.0, 1.5])[0].tolist() == [2, 4, 6]  # each step at its level


def test_closed_loop_breakpoint_names_users(timed_server, scenario_for, run, tmp_path):
    load = {"concurrency": {"type": "breakpoint", "start": 1, "step": 1, "hold": "0.8s", "max": 4,
                            "stop_when": ["p50(e2e) > 100ms"]}, "duration": None}  # fmt: skip
    result = run(scenario_for(timed_server.url, load=load), tmp_path / "run")
    assert result.stop_reason == "breakpoint: 'p50(e2e) > 100ms' held at 1 users (step 1)"
    assert set(read_records(result.run_dir)["user"].to_pylist()) == {0}
