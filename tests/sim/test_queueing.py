"""The simulator against queueing theory: M/M/1 and M/M/c waiting times, and Little's Law.

A pool with ``service_time: {dist: exponential}`` is a plain queueing server: each request
holds one server for an exponential time and the fleet queue in front is first come first
served, so Poisson arrivals make an M/M/c system. The waiting time is the time from the
intended send to the start of service (``first_byte_ns`` for the service model).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from surgelab.metrics.store import read_records

from .helpers import fleet, run, scenario


def erlang_c_wait(c: int, lam: float, mu: float) -> float:
    """Mean waiting time in queue of M/M/c (Erlang C)."""
    a = lam / mu
    rho = a / c
    below = sum(a**k / math.factorial(k) for k in range(c))
    top = a**c / math.factorial(c) / (1 - rho)
    return top / (below + top) / (c * mu - lam)


@pytest.mark.parametrize(
    ("servers", "per_replica", "lam", "mu", "duration"),
    [(1, 1, 7.0, 10.0, 12000), (4, 1, 30.0, 10.0, 4000), (3, 3, 24.0, 10.0, 4000)],
    ids=["M/M/1", "M/M/4 as 4 replicas", "M/M/3 as one replica of 3 servers"],
)
def test_mean_waiting_time_matches_closed_form(tmp_path, servers, per_replica, lam, mu, duration):
    scen = scenario({"rate": lam, "duration": f"{duration}s", "warmup": "100s", "max_in_flight": 100_000})
    pool = {"replicas": servers // per_replica, "service_time": {"dist": "exponential", "mean": 1 / mu}}
    if per_replica > 1:
        pool["concurrency"] = per_replica
    result = run(tmp_path, scen, fleet(pools=[pool]))
    t = read_records(result.run_dir)
    measured = ~t["warmup"].to_numpy(zero_copy_only=False)
    intended = t["intended_ns"].to_numpy(zero_copy_only=False)[measured]
    wait = (t["first_byte_ns"].to_numpy(zero_copy_only=False)[measured] - intended) / 1e9
    e2e = (t["end_ns"].to_numpy(zero_copy_only=False)[measured] - intended) / 1e9
    expected = erlang_c_wait(servers, lam, mu)
    assert wait.mean() == pytest.approx(expected, rel=0.05)
    assert e2e.mean() == pytest.approx(expected + 1 / mu, rel=0.05)
    assert result.summary["requests"]["ok"] == result.summary["requests"]["scheduled"]


def test_littles_law_holds_on_simulated_output(tmp_path):
    scen = scenario(
        {"rate": 20, "duration": "300s", "warmup": "20s"}, workload={"prompt_tokens": 300, "output_tokens": 60}
    )
    result = run(tmp_path, scen, fleet(pools=[{"replicas": 1, "profile": "llama3-8b-h100"}]))
    c = result.summary["concurrency"]
    assert c["mean_in_flight"] > 1
    assert c["mean_in_flight"] == pytest.approx(c["littles_law_estimate"], rel=0.02)
    assert c["arrival_rate"] == pytest.approx(20, rel=0.1)


def test_same_schedule_as_a_real_run(tmp_path):
    """Intended times are the runner's own open-loop offsets, ids its own ids."""
    from surgelab.load.phases import open_loop_offsets

    scen = scenario({"rate": 5, "duration": "30s"})
    result = run(tmp_path, scen, fleet(pools=[{"replicas": 1, "service_time": 0.01}]))
    t = read_records(result.run_dir)
    assert np.array_equal(np.sort(t["intended_ns"].to_numpy()), open_loop_offsets(scen, 0))
    assert np.array_equal(t["sent_ns"].to_numpy(), t["intended_ns"].to_numpy())
