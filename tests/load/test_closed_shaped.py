"""Closed loop with a shaped number of users: in flight never above the plan, and reaching it."""

from __future__ import annotations

import math

import numpy as np

from surgelab.metrics.store import read_records
from surgelab.units import SECOND

STAGES = {"type": "stages", "start": 1, "stages": [{"duration": "1s", "target": 4}, {"duration": "1s", "target": 4},
                                                   {"duration": "1s", "target": 1}]}  # fmt: skip


def in_flight_at(t: np.ndarray, sent: np.ndarray, end: np.ndarray) -> np.ndarray:
    return np.array([np.sum((sent <= x) & (x < end)) for x in t])


def test_stages_of_users_bound_and_fill_the_in_flight_count(timed_server, scenario_for, run, reconciled, tmp_path):
    s = scenario_for(timed_server.url, load={"concurrency": STAGES, "duration": "3s"}, workload={"output_tokens": 4})
    result = run(s, tmp_path / "run")
    table = reconciled(result.summary, tmp_path / "run")
    assert result.stop_reason == "completed" and result.summary["requests"]["failed"] == 0
    level = s.load.shape.level
    sent, end = (np.array(table[c].to_pylist()) / SECOND for c in ("sent_ns", "end_ns"))
    intended, users = np.array(table["intended_ns"].to_pylist()) / SECOND, np.array(table["user"].to_pylist())
    assert set(users.tolist()) == {0, 1, 2, 3}
    # Each user sent only while active: the level was checked between its intended and actual send.
    assert np.all(users < np.maximum(level(intended), level(sent)))
    # A user above the level finishes what it started: allow the level of one request ago.
    longest = float((end - sent).max())
    assert longest < 0.5
    grid = np.arange(0, 3.0, 0.002)
    flying = in_flight_at(grid, sent, end)
    allowed = np.array([math.ceil(level(np.linspace(max(x - longest, 0), x, 50)).max() - 1e-9) for x in grid])
    assert np.all(flying <= allowed), grid[flying > allowed]
    rising = grid <= 2.0  # while the level does not fall, the bound is the level itself
    assert np.all(flying[rising] <= np.ceil(level(grid[rising]) - 1e-9))
    # ... and it is reached: all four users busy for most of the hold (zero think time, 0.26 s requests).
    hold = (grid >= 1.2) & (grid < 2.0)
    assert flying[hold].max() == 4 and np.mean(flying[hold] == 4) > 0.8
    assert np.mean(flying[grid > 2.5]) < 3  # and ramps down again (level 2.5 → 1)


def test_a_user_idle_at_the_start_joins_when_the_level_reaches_it(timed_server, scenario_for, run, tmp_path):
    ramp = {"type": "ramp", "start": 0.5, "end": 3, "over": "2s"}  # 0.5 + 1.25 t: user 1 from 0.4 s, user 2 from 1.2 s
    s = scenario_for(timed_server.url, load={"concurrency": ramp, "duration": "2s"}, workload={"output_tokens": 2})
    table = read_records(run(s, tmp_path / "run").run_dir)
    first: dict[int, float] = {}
    for user, intended in zip(table["user"].to_pylist(), table["intended_ns"].to_pylist()):
        first[user] = min(first.get(user, intended / SECOND), intended / SECOND)
    assert sorted(first) == [0, 1, 2] and first[0] == 0
    assert 0.4 <= first[1] < 0.4 + 0.12  # noticed within one nap (0.1 s) of becoming active
    assert 1.2 <= first[2] < 1.2 + 0.12
