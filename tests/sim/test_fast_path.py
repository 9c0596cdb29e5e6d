"""The fast path (``Engine.run``/``plan``/``advance``) gives exactly the run of stepping the engine one step per event.

Each scenario is simulated twice, ``fast=True`` and ``fast=False`` (every engine stepped by
``Engine.step()``, one event per step: the reference), and every output must be equal value
for value: ``records.parquet`` (every timestamp, every inter-token gap, every token count and
state), ``summary.json``, ``fleet.json`` and the ``fleet.parquet`` timeline. Nothing is
compared with a tolerance: both paths time each step with ``EngineProfile.step_times`` and
round it to the nanosecond the same way, so the sums are the same integers.
"""

from __future__ import annotations

import json

import pytest

from surgelab.sim import simulate

from .helpers import TARGET, fleet, outputs, scenario

VARIED = {
    "prompt_tokens": {"dist": "uniform", "min": 100, "max": 800},
    "output_tokens": {"dist": "uniform", "min": 1, "max": 200},
}
LONG = {"prompt_tokens": {"dist": "uniform", "min": 100, "max": 800}, "output_tokens": 150}
TIMEOUTS = {"target": {**TARGET, "timeouts": {"first_token": "3s", "total": "8s"}}}
SPIKE = {"type": "spike", "base": 10, "peak": 60, "at": "20s", "rise": "5s", "hold": "20s", "decay": "5s", "after": "20s"}  # fmt: skip
SMALL_BUDGET = {  # llama3-8b-h100 with a 512-token step budget and 12k tokens of KV: chunked prefill, preemption
    "prefill_s_per_token": 3.9e-05, "decode_base_s": 0.0060, "s_per_kv_token": 3.9e-08, "step_overhead_s": 0.001,
    "kv_capacity_tokens": 12_000, "max_num_seqs": 64, "max_batched_tokens": 512,
}  # fmt: skip
CPU_LIKE = {  # the same with a CPU's step: parts added, prefill attention, per-sequence overhead
    **SMALL_BUDGET, "combine": "sum", "prefill_s_per_pair": 2e-9, "step_s_per_seq": 1e-4,
}  # fmt: skip
FRONT_END = {**SMALL_BUDGET, "request_overhead_s": 0.0073}  # the API server's time per request, before any step
PROFILES = {"SMALL_BUDGET": SMALL_BUDGET, "CPU_LIKE": CPU_LIKE, "FRONT_END": FRONT_END}

CASES = {
    "continuous batching, arrivals mid-decode": ({"rate": 20, "duration": "40s"}, VARIED, {}, {}),
    "KV cache full: queuing, preemption, recompute": ({"rate": 8, "duration": "40s"}, LONG, {"profile": "llama2-7b-a10"}, {}),
    "client timeouts: first token and total": ({"rate": 10, "duration": "40s"}, LONG, {"profile": "llama2-7b-a10"}, TIMEOUTS),
    "closed loop": (
        {"concurrency": 30, "think_time": "1s", "duration": "40s"},
        {"prompt_tokens": 300, "output_tokens": 100}, {}, {},
    ),
    "closed loop without think time: each request sent at a step's end": (
        {"concurrency": 24, "duration": "30s"}, VARIED, {}, {},
    ),
    "chunked prefill over a small step budget": (
        {"rate": 3, "duration": "40s"},
        {"prompt_tokens": {"dist": "uniform", "min": 200, "max": 3000}, "output_tokens": {"dist": "uniform", "min": 5, "max": 120}},
        {"profile": "SMALL_BUDGET"}, {},
    ),
    "prefix cache: shared system prompt, eviction under KV pressure": (
        {"rate": 8, "duration": "40s"},
        {**VARIED, "system_prompt_tokens": 600},
        {"profile": "SMALL_BUDGET"}, {"cache": {"prefix": True}},
    ),
    "an additive step with attention and per-sequence costs: chunks, cache hits, preemption": (
        {"rate": 6, "duration": "30s"},
        {**VARIED, "system_prompt_tokens": 600},
        {"profile": "CPU_LIKE"}, {"cache": {"prefix": True}},
    ),
    "multi-turn sessions": (
        {"concurrency": 12, "think_time": "500ms", "duration": "30s"},
        {"prompt_tokens": {"dist": "uniform", "min": 50, "max": 300}, "output_tokens": {"dist": "uniform", "min": 20, "max": 120},
         "session": {"turns": 3, "think_time": "1s"}},
        {}, {},
    ),
    "a front end's time per request: admission after it, timeouts and a crash meanwhile": (
        {"rate": 12, "duration": "30s"}, LONG,
        {"profile": "FRONT_END", "failures": {"crashes": [{"at": "12s", "replica": 1}], "recovery": "2s"}}, TIMEOUTS,
    ),
    "four replicas, round robin": ({"rate": 40, "duration": "30s"}, VARIED, {"replicas": 4}, {"router": {"policy": "round_robin"}}),
    "crashes, health checks, restarts with cold start": (
        {"rate": 20, "duration": "60s"}, LONG,
        {"replicas": 3, "cold_start": "5s", "failures": {"crashes": [{"at": "15s", "replica": 1}], "mtbf": "40s", "recovery": "3s"}},
        {"router": {"health_check": {"interval": "2s"}}, **TIMEOUTS},
    ),
    "a region's round trip with jitter, and its outage": (
        {"rate": 20, "duration": "30s"}, VARIED, {"region": "r", "cold_start": "2s"},
        {"regions": [{"name": "r", "rtt": "30ms", "jitter": "10ms", "outages": [{"at": "10s", "duration": "5s"}]}],
         "router": {"health_check": {"interval": "2s"}}},
    ),
    "autoscaling on engine busy time": (
        {"rate": SPIKE}, LONG,
        {"replicas": 1, "cold_start": "5s", "autoscale": {"metric": "busy", "target": 0.5, "min": 1, "max": 5, "sync_period": "5s"}}, {},
    ),
    "admission queue: concurrency limit, queue autoscaling, shedding": (
        {"rate": SPIKE}, LONG,
        {"replicas": 1, "concurrency": 20, "cold_start": "5s",
         "autoscale": {"metric": "queue", "target": 4, "min": 1, "max": 4, "sync_period": "5s"}},
        {"admission": {"max_depth": 60, "timeout": "10s"}},
    ),
}  # fmt: skip


def _run(tmp_path, case, fast):
    load, workload, pool, extra = CASES[case]
    fields = {k: v for k, v in extra.items() if k in ("target",)}
    scen = scenario(load, workload=workload, **fields)
    pool = {"replicas": 2, "profile": "llama3-8b-h100", **pool}
    if pool["profile"] in PROFILES:
        path = tmp_path / f"{pool['profile']}.json"
        path.write_text(json.dumps(PROFILES[pool["profile"]]))
        pool["profile"] = str(path)
    flt = fleet(pools=[pool], **{k: v for k, v in extra.items() if k != "target"})
    return simulate(scen, flt, tmp_path / ("fast" if fast else "reference"), fast=fast)


@pytest.mark.parametrize("case", list(CASES))
def test_fast_path_equals_step_by_step(tmp_path, case):
    fast, reference = _run(tmp_path, case, True), _run(tmp_path, case, False)
    records, summary, report, timeline = outputs(fast.run_dir)
    want_records, want_summary, want_report, want_timeline = outputs(reference.run_dir)
    assert records.num_rows == want_records.num_rows > 100
    assert records.equals(want_records)  # every timestamp, gap, count and state
    assert summary == want_summary
    assert report == want_report
    assert timeline.equals(want_timeline)
    assert fast.fleet["events"] < reference.fleet["events"]  # and it did take the fast path
