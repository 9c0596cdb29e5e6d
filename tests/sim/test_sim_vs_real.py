"""A simulated run of the embedded server's profile against a measured run of `surgelab serve`.

Same profile, same scenario (so the same schedule and the same requests): the simulator
steps the engine in virtual time exactly as the server's driver does in wall time, so the
E2E percentiles agree within 10 %.
"""

from __future__ import annotations

import asyncio

import pytest

from surgelab.runner import run_scenario
from surgelab.server.process import serve_process

from .helpers import fleet, run, scenario

PROFILE = "llama3-8b-h100"


@pytest.mark.timeout(120)
def test_simulated_matches_measured_e2e(tmp_path):
    load = {"rate": 8, "duration": "20s", "warmup": "3s", "arrival": "poisson"}
    workload = {"prompt_tokens": {"dist": "uniform", "min": 100, "max": 600}, "output_tokens": 64}
    with serve_process(profile=PROFILE) as url:
        real_scenario = scenario(load, workload=workload, seed=7, target={"url": url, "model": "m"})
        measured = asyncio.run(run_scenario(real_scenario, tmp_path / "real")).summary
    simulated = run(tmp_path, real_scenario, fleet(pools=[{"replicas": 1, "profile": PROFILE}]), "sim").summary
    assert measured["requests"]["ok"] == simulated["requests"]["ok"] == measured["requests"]["scheduled"]
    for q in ("p50", "p99"):
        real, sim = measured["latency_ms"]["e2e"][q], simulated["latency_ms"]["e2e"][q]
        print(f"E2E {q}: measured {real:.1f} ms, simulated {sim:.1f} ms ({sim / real - 1:+.1%})")
        assert sim == pytest.approx(real, rel=0.10), (q, real, sim)
