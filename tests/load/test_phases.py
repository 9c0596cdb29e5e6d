"""Two overlapping phases, one open and one closed loop, with a start offset and jitter."""

from __future__ import annotations

import numpy as np

from surgelab.load.phases import ID_STRIDE, open_loop_offsets, plan_phases
from surgelab.metrics.store import read_records
from surgelab.scenario.loader import build_scenario
from surgelab.units import SECOND

PHASES = [
    {"name": "day", "load": {"rate": 12, "duration": "2s"}, "workload": {"prompt_tokens": 16, "output_tokens": 3}},
    {"name": "night", "start": "0.6s", "jitter": "0.4s", "load": {"concurrency": 2, "duration": "1.2s"},
     "workload": {"prompt_tokens": 30, "output_tokens": 5, "mix": [{"name": "batch"}]}},
]  # fmt: skip


def scenario(url: str, seed: int):
    return build_scenario({"target": {"url": url, "model": "ok"}, "seed": seed, "phases": PHASES})


def test_jitter_is_drawn_in_its_range_and_from_the_seed():
    def jitters(seeds: range) -> list[float]:
        return [plan_phases(scenario("http://127.0.0.1:9/v1", seed))[1].start_ns / SECOND - 0.6 for seed in seeds]

    drawn = jitters(range(30))
    assert all(0 <= j < 0.4 for j in drawn) and np.std(drawn) > 0.05
    assert drawn[:5] == jitters(range(5))
    assert plan_phases(scenario("http://127.0.0.1:9/v1", 3))[0].start_ns == 0  # no jitter asked, none given


def test_overlapping_open_and_closed_phases(timed_server, run, tmp_path):
    s = scenario(timed_server.url, seed=4)
    plans = plan_phases(s)
    jitter = plans[1].start_ns / SECOND - 0.6
    result = run(s, tmp_path / "run")
    table = read_records(result.run_dir)
    assert set(table["state"].to_pylist()) == {"ok"}
    ids = table["id"].to_pylist()
    assert len(set(ids)) == len(ids)
    rows = table.to_pylist()
    day = [r for r in rows if r["phase"] == "day"]
    night = [r for r in rows if r["phase"] == "night"]
    assert len(day) + len(night) == len(rows)
    # day: the open-loop schedule from t = 0, ids 0..n-1
    assert [r["intended_ns"] for r in day] == open_loop_offsets(s, 0).tolist()
    assert [r["id"] for r in day] == list(range(len(day))) and {r["user"] for r in day} == {-1}
    # night: both users start at its offset plus the drawn jitter, and stay inside the phase
    intended = np.array([r["intended_ns"] for r in night]) / SECOND
    assert 0 <= jitter < 0.4 and intended.min() == plans[1].start_ns / SECOND
    assert sum(intended == intended.min()) == 2 and intended.max() < plans[1].end_ns / SECOND
    assert all(r["id"] >= ID_STRIDE for r in night) and {r["user"] for r in night} == {0, 1}
    assert {r["request_class"] for r in night} == {"batch"} and {r["request_class"] for r in day} == {"default"}
    assert {r["prompt_tokens"] for r in night} == {30} and {r["prompt_tokens"] for r in day} == {16}
    # the phases really overlapped
    day_sent = np.array([r["sent_ns"] for r in day]) / SECOND
    assert np.any((day_sent > intended.min()) & (day_sent < intended.max()))
    # and the summary keeps them apart
    by_phase = result.summary["by_phase"]
    assert set(by_phase) == {"day", "night"}
    assert by_phase["day"]["requests"]["ok"] == len(day) and by_phase["night"]["requests"]["ok"] == len(night)
    assert by_phase["night"]["latency_ms"]["ttft"]["p50"] > 150  # the scripted 200 ms
    assert result.summary["mode"] == "mixed"
