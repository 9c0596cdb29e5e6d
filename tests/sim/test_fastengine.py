"""Runs of steps in closed form give exactly the records of stepping the engine one step at a time."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from surgelab.sim import simulate

from .helpers import fleet, scenario

VARIED = {
    "prompt_tokens": {"dist": "uniform", "min": 100, "max": 800},
    "output_tokens": {"dist": "uniform", "min": 1, "max": 200},
}
LONG = {"prompt_tokens": {"dist": "uniform", "min": 100, "max": 800}, "output_tokens": 150}
CASES = {
    "uncontended": ({"rate": 20, "duration": "40s"}, VARIED, "llama3-8b-h100", {}),
    "KV cache full: hands over to the engine and back": ({"rate": 4, "duration": "40s"}, LONG, "llama2-7b-a10", {}),
    "client timeouts": (
        {"rate": 5, "duration": "40s"}, LONG, "llama2-7b-a10",
        {"target": {"url": "http://127.0.0.1:9/v1", "model": "m", "timeouts": {"first_token": "3s", "total": "8s"}}},
    ),
    "closed loop": ({"concurrency": 30, "think_time": "1s", "duration": "40s"}, {"prompt_tokens": 300, "output_tokens": 100}, "llama3-8b-h100", {}),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_fast_runs_equal_step_by_step(tmp_path, case):
    load, workload, profile, extra = CASES[case]
    scen = scenario(load, workload=workload, **extra)
    flt = fleet(pools=[{"replicas": 2, "profile": profile}])
    fast = simulate(scen, flt, tmp_path / "fast", fast=True)
    reference = simulate(scen, flt, tmp_path / "reference", fast=False)
    a, b = (pq.read_table(r.run_dir / "records.parquet") for r in (fast, reference))
    assert a.num_rows == b.num_rows > 100
    assert a.equals(b)
    assert fast.summary["latency_ms"] == reference.summary["latency_ms"]
