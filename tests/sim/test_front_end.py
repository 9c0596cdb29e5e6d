"""A profile's front-end time per request (``request_overhead_s``): it delays admission, not the engine."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from surgelab.sim import simulate

from .helpers import fleet, scenario

PROFILE = {  # llama3-8b-h100-like steps of 7 ms and more
    "prefill_s_per_token": 3.9e-05, "decode_base_s": 0.0060, "s_per_kv_token": 3.9e-08, "step_overhead_s": 0.001,
    "kv_capacity_tokens": 50_000, "max_num_seqs": 16, "max_batched_tokens": 2048,
}  # fmt: skip
FRONT = 0.05


VARIED = {"dist": "uniform", "min": 50, "max": 900}


def _records(tmp_path, name, load, front, fast, prompt=VARIED):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({**PROFILE, "request_overhead_s": front}))
    scen = scenario(load, workload={"prompt_tokens": prompt, "output_tokens": 40})
    result = simulate(scen, fleet(pools=[{"replicas": 1, "profile": str(path)}]), tmp_path / name, fast=fast)
    return pq.read_table(result.run_dir / "records.parquet").to_pydict()


@pytest.mark.parametrize("fast", [True, False])
def test_an_idle_request_waits_the_front_end_then_the_same_steps(tmp_path, fast):
    load = {"rate": 1, "duration": "20s"}  # one at a time: every request finds the engine idle
    without = _records(tmp_path, "without", load, 0.0, fast)
    with_front = _records(tmp_path, "with", load, FRONT, fast)
    assert len(with_front["sent_ns"]) == len(without["sent_ns"]) > 10
    ttft = np.subtract(with_front["first_token_ns"], with_front["sent_ns"])
    base = np.subtract(without["first_token_ns"], without["sent_ns"])
    assert np.array_equal(ttft - base, np.full(ttft.size, round(FRONT * 1e9)))  # exactly the front end, once
    assert with_front["itl_us"] == without["itl_us"]  # the steps after it are the same steps


@pytest.mark.parametrize("fast", [True, False])
def test_the_front_end_does_not_hold_up_the_steps_of_others(tmp_path, fast):
    # eight users back to back: while one request is in the front end, the others decode on (short
    # prompts: a step that prefills some of them is still far shorter than a front end)
    records = _records(tmp_path, "busy", {"concurrency": 8, "duration": "10s"}, FRONT, fast, prompt=50)
    gaps = np.concatenate([np.asarray(g, float) for g in records["itl_us"]]) / 1e6
    assert gaps.size > 1000
    assert gaps.max() < FRONT / 2  # a step never includes a front end's 50 ms
    ttft = (np.subtract(records["first_token_ns"], records["sent_ns"])) / 1e9
    assert ttft.min() >= FRONT
