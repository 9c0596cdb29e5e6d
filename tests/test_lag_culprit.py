"""Lag diagnosis names the culprit: the client's own CPU, or other processes on the machine."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from surgelab.analysis.columns import Labels
from surgelab.analysis.start_burst import start_burst
from surgelab.telemetry.diagnose import diagnose


def _summary(cpu: dict | None) -> dict:
    summary = {
        "schedule_lag_ms": {"p99": 80.0},
        "validity": {"valid": False, "max_lag_p99_ms": 10.0},
        "requests": {"by_state": {"http_error": 0, "timeout": 0, "connection_error": 0, "protocol_error": 0}, "failed": 0},
        "latency_ms": {"ttft": {}},
        "concurrency": {},
    }
    if cpu is not None:
        summary["host_cpu"] = cpu
    return summary


def _cpu(client: float, busy: float, cpus: int = 2, processes: int = 1, saturated: int = 0) -> dict:
    return {"cpus": cpus, "client_processes": processes, "client_cores": client, "machine_busy_cores": busy,
            "other_cores": busy - client, "seconds": 10, "saturated_seconds": saturated,
            "busiest_second_cores": max(busy, 1.9 if saturated else busy)}  # fmt: skip


def test_a_starved_client_is_told_apart_from_an_overloaded_one():
    [starved] = diagnose(_summary(_cpu(client=0.15, busy=1.95)))
    assert "saturated by other processes" in starved and "1.9 of 2 cores" in starved and "0.15 of a core" in starved
    assert "add workers" not in starved
    [overloaded] = diagnose(_summary(_cpu(client=0.98, busy=1.2)))
    assert "the load generator is the bottleneck" in overloaded and "add workers" in overloaded
    [two] = diagnose(_summary(_cpu(client=1.9, busy=1.95, processes=2)))
    assert "the load generator is the bottleneck" in two and "in 2 processes" in two
    [moments] = diagnose(_summary(_cpu(client=0.02, busy=1.4, saturated=3)))  # an engine's busy bursts
    assert "saturated by other processes (in 3 of 10 seconds" in moments and "add workers" not in moments
    [bursts] = diagnose(_summary(_cpu(client=0.2, busy=0.6)))
    assert "without being short of CPU" in bursts and "add workers" not in bursts
    [unknown] = diagnose(_summary(None))
    assert "not measured" in unknown


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="the machine's CPU accounts are read from /proc/stat")
def test_a_run_records_its_own_and_the_machines_cpu(zero_server, scenario_for, run, tmp_path):
    """With every core spun by other processes, the run's accounts show the machine busy and the client light."""
    cpus = os.cpu_count() or 1
    spin = "import time\nend = time.monotonic() + 8\nwhile time.monotonic() < end: pass\n"
    hogs = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(cpus)]
    try:
        result = run(scenario_for(zero_server.url, load={"rate": 5, "duration": "3s"}), tmp_path / "run")
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    cpu = result.summary["host_cpu"]
    assert cpu["cpus"] == cpus and cpu["client_processes"] == 1
    assert cpu["machine_busy_cores"] >= 0.8 * cpus  # the hogs
    assert cpu["client_cores"] < 0.5  # 5 requests a second cost the client little
    assert cpu["other_cores"] == pytest.approx(cpu["machine_busy_cores"] - cpu["client_cores"], abs=0.01)
    assert cpu["seconds"] >= 2 and cpu["saturated_seconds"] >= 1  # the hogs, second by second
    assert cpu["busiest_second_cores"] >= 0.9 * cpus


class _Columns:
    """The three record columns the start-burst reading needs, for one phase ``main``."""

    def __init__(self, intended: np.ndarray, lag: np.ndarray) -> None:
        self.phase = Labels(np.zeros(len(intended), dtype=np.uint8), ["main"])
        self.intended, self.sent = intended, intended + lag


def _closed_loop(scenario_for, users: int, ramp_up: str = "0s"):
    return scenario_for("http://127.0.0.1:1/v1", load={"concurrency": users, "duration": "20s", "ramp_up": ramp_up})


def _burst_hint(c: _Columns, scenario) -> tuple[dict | None, str]:
    burst = start_burst(c, np.ones(len(c.intended), dtype=bool), 0.05, scenario)
    late = int(np.sum(c.sent - c.intended > 0.05))
    summary = _summary(_cpu(client=0.3, busy=1.95, saturated=8))  # the server beside the client kept both cores busy
    summary["validity"].update(start_burst=burst, late_sends=late)
    [hint] = diagnose(summary)
    return burst, hint


def test_late_sends_at_the_start_of_a_closed_loop_name_the_ramp_up_not_the_machine(scenario_for):
    """2,000 users all start at once: the first sends are late, the rest of the run is on time."""
    rng = np.random.default_rng(1)
    first = np.zeros(2000)  # every user's first send is intended at the phase's start
    later = np.sort(rng.uniform(0.2, 20, 6000))
    intended = np.concatenate([first, later])
    lag = np.concatenate([np.linspace(0, 0.4, 2000), np.full(6000, 0.001)])
    burst, hint = _burst_hint(_Columns(intended, lag), _closed_loop(scenario_for, 2000))
    assert burst["late_sends"] == 1750 and burst["rest_on_time"] and burst["rest_late_sends"] == 0
    assert "where all 2,000 users start at once" in hint and "--ramp-up" in hint
    assert f"--ramp-up {burst['suggested_ramp_up_s']}s" in hint and 10 <= burst["suggested_ramp_up_s"] <= 30
    assert "other processes" not in hint


def test_a_loaded_machine_is_still_blamed_when_sends_are_late_all_through_the_run(scenario_for):
    rng = np.random.default_rng(2)
    intended = np.concatenate([np.zeros(2000), np.sort(rng.uniform(0.2, 20, 6000))])
    lag = np.where(rng.uniform(size=8000) < 0.2, 0.3, 0.001)  # a fifth of the sends late, start or not
    burst, hint = _burst_hint(_Columns(intended, lag), _closed_loop(scenario_for, 2000))
    assert burst is not None and not burst["rest_on_time"]
    assert "saturated by other processes" in hint and "--ramp-up" not in hint


def test_users_that_ramp_up_are_no_start_burst(scenario_for):
    ramped = _closed_loop(scenario_for, 2000, "10s")
    late = _Columns(np.linspace(0, 10, 2000), np.full(2000, 0.3))
    assert start_burst(late, np.ones(2000, bool), 0.05, ramped) is None
