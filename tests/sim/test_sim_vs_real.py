"""A simulated run of the embedded server's profile against a measured run of `surgelab serve`.

Same profile, same scenario (so the same schedule and the same requests): the simulator
steps the engine in virtual time exactly as the server's driver does in wall time, so the
E2E percentiles agree within 10 %. The measured side runs in real time on a shared machine:
when other processes starve the server (its token gaps grow a tail the engine never makes,
and its P99 drifts up), the measurement is repeated on a fresh server, up to three times;
if every attempt was starved, the P99 clause is skipped, never passed, and the P50 still
has to agree.
"""

from __future__ import annotations

import asyncio

import pytest

from surgelab.runner import run_scenario
from surgelab.server.process import serve_process

from .helpers import fleet, run, scenario

PROFILE = "llama3-8b-h100"


def _close(measured: dict, simulated: dict, q: str) -> bool:
    return simulated["latency_ms"]["e2e"][q] == pytest.approx(measured["latency_ms"]["e2e"][q], rel=0.10)


def _starved(measured: dict, simulated: dict) -> bool:
    """The server fell behind real time: its token gaps have a tail the engine model never makes."""
    return measured["latency_ms"]["itl"]["p99"] > 1.5 * simulated["latency_ms"]["itl"]["p99"]


@pytest.mark.timeout(170)
def test_simulated_matches_measured_e2e(tmp_path):
    load = {"rate": 8, "duration": "20s", "warmup": "3s", "arrival": "poisson"}
    workload = {"prompt_tokens": {"dist": "uniform", "min": 100, "max": 600}, "output_tokens": 64}
    simulated: dict = {}
    for attempt in range(3):  # a fresh server each time: its prefix cache would remember the prompts
        with serve_process(["--model", "m"], profile=PROFILE) as url:
            real_scenario = scenario(load, workload=workload, seed=7, target={"url": url, "model": "m"})
            measured = asyncio.run(run_scenario(real_scenario, tmp_path / f"real-{attempt}")).summary
        simulated = (
            simulated or run(tmp_path, real_scenario, fleet(pools=[{"replicas": 1, "profile": PROFILE}]), "sim").summary
        )
        if _close(measured, simulated, "p99"):
            break  # a P99 of ~130 requests on a shared 2-core machine can miss by one slow request: measure again
    assert measured["requests"]["ok"] == simulated["requests"]["ok"] == measured["requests"]["scheduled"]
    for q in ("p50", "p99"):
        real, sim = measured["latency_ms"]["e2e"][q], simulated["latency_ms"]["e2e"][q]
        print(f"E2E {q}: measured {real:.1f} ms, simulated {sim:.1f} ms ({sim / real - 1:+.1%})")
    assert _close(measured, simulated, "p50")
    if not _close(measured, simulated, "p99") and _starved(measured, simulated):
        pytest.skip(
            f"the machine starved the real server three times (ITL P99 {measured['latency_ms']['itl']['p99']:.0f} ms): no reference for P99"
        )
    assert _close(measured, simulated, "p99")
