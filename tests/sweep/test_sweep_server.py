"""Sweeps against the embedded server (a real subprocess on loopback) with a small running batch.

The profile makes every decode step 5 ms and holds 8 sequences, so with 32-token prompts
and outputs the plateau is ``steady_throughput(8, 32, 32) ÷ 32`` = 50 requests/s and it
arrives at 8 users; beyond it requests queue and TTFT climbs until the stop rule holds.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from surgelab.aio import run_async
from surgelab.engine import load_profile
from surgelab.scenario import load_scenario
from surgelab.server.process import serve_process
from surgelab.sweep import BreakConfig, StopRules, SweepConfig, read_sweep, run_sweep

PROFILE = {
    "model": "sweep-model", "prefill_s_per_token": 1.0e-6, "decode_base_s": 0.005, "s_per_kv_token": 0.0,
    "step_overhead_s": 0.0, "kv_capacity_tokens": 100000, "max_num_seqs": 8, "max_batched_tokens": 4096,
}  # fmt: skip
SCENARIO = {
    "name": "sweep-test",
    "target": {"url": "http://127.0.0.1:9/v1", "model": "sweep-model"},  # the model the profile serves
    "load": {"concurrency": 1},
    "workload": {"prompt_tokens": 32, "output_tokens": 32},
    "slo": {"ttft": "100ms"},
}
SHORT = ["--hold", "2s", "--settle", "0.5s", "--warmup", "1s"]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sweep-files")
    (root / "profile.yaml").write_text(yaml.safe_dump(PROFILE))
    (root / "scenario.yaml").write_text(yaml.safe_dump(SCENARIO))
    return {"profile": root / "profile.yaml", "scenario": root / "scenario.yaml", "root": root}


@pytest.fixture(scope="module")
def swept(files, tmp_path_factory, cli):
    """``surgelab sweep --serve`` once, end to end as a subprocess."""
    out = tmp_path_factory.mktemp("sweep") / "s"
    result = cli(
        "sweep", str(files["scenario"]), "--serve", str(files["profile"]), *SHORT, "--max", "64",
        "--break-at", "3", "--break-hold", "2s", "--recovery", "2s", "--out", str(out), timeout=80,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return out, result


def test_plateau_matches_the_profile_and_the_sweep_stops_itself(swept, files):
    out, cli = swept
    sweep = read_sweep(out)
    profile = load_profile(files["profile"])
    predicted = profile.steady_throughput(profile.max_num_seqs, 32, 32) / 32
    plateau = max(r.requests_per_s for r in sweep.levels)
    assert plateau == pytest.approx(predicted, rel=0.15), (plateau, predicted)
    assert sweep.stop_reason.startswith("stopped: p99(ttft)"), sweep.stop_reason
    assert max(r.offered for r in sweep.levels) < 64  # stopped before the planned top level
    assert sweep.knee["level"] in (8, 16), sweep.knee
    assert "throughput bends at" in sweep.knee["reason"]
    cap = sweep.sla_capacity
    assert cap is not None and cap["level"] <= 16 and cap["requests_per_s"] > 0.5 * predicted
    assert "SLA capacity" in cli.stdout and "knee:" in cli.stdout


def test_every_level_is_an_ordinary_run(swept):
    out, _ = swept
    sweep = read_sweep(out)
    table = pq.read_table(out / "sweep.parquet")
    assert table.num_rows == len(sweep.levels) and "ttft_p99_ms" in table.column_names
    for row in sweep.levels:
        summary = json.loads((out / row.run_dir / "summary.json").read_text())
        assert (out / row.run_dir / "records.parquet").exists()
        assert summary["load"]["concurrency"] == row.offered and row.valid
    assert (out / "warmup" / "summary.json").exists()


def test_breaking_phase_queues_then_recovers(swept):
    b = read_sweep(swept[0]).breaking
    assert b is not None and b["level"] == 3 * b["expected_peak"]
    assert b["mode"] == "latency" and b["error_rate"] == 0.0
    assert b["recovered"] and b["recovery_s"] < 2.0


def test_plan_from_the_sweep_writes_hpa_and_alerts(swept, tmp_path, cli):
    out, _ = swept
    cap = read_sweep(out).sla_capacity
    result = cli("plan", str(out), "--peak", "500", "--spares", "1", "--gpu-hour-cost", "2", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    n = math.ceil(500 / (cap["requests_per_s"] * 0.7))
    assert f"{n + 1} instances" in result.stdout and "M/M/c check" in result.stdout
    hpa = yaml.safe_load((tmp_path / "hpa.yaml").read_text())
    assert hpa["apiVersion"] == "autoscaling/v2" and hpa["spec"]["maxReplicas"] == n + 1
    assert hpa["spec"]["minReplicas"] == 2
    rules = yaml.safe_load((tmp_path / "alerts.yaml").read_text())["groups"][0]["rules"]
    assert any(r["alert"] == "InferenceTtftP99AboveSlo" and r["expr"].endswith("> 0.1") for r in rules)
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["fleet"]["total"] == n + 1 and plan["mmc"]["servers"] >= 1


def test_a_rate_limited_server_stops_the_sweep_on_errors(files, tmp_path):
    scenario = load_scenario(files["scenario"], {})
    config = SweepConfig(
        levels=[4, 16, 32], hold=1.5, settle=0.3, warmup=0, stop=StopRules(max_error_rate=0.05),
        breaking=BreakConfig(multiple=4, expected_peak=4, hold=1.5, recovery=1.5),
    )  # fmt: skip
    with serve_process(["--max-inflight", "8"], profile=str(files["profile"])) as url:
        scenario = load_scenario(files["scenario"], {"target.url": ("", url)})
        result = run_async(run_sweep(scenario, config, tmp_path / "s"))
    assert [r.offered for r in result.levels] == [4, 16]
    # the sweep's own error-rate rule, or the run's guard rails when they trip first (a 429 storm)
    reason = result.stop_reason
    assert reason.startswith("stopped:") and "16" in reason and ("error rate" in reason or "guard" in reason), reason
    assert result.breaking is not None and result.breaking["mode"].startswith("errors")
    assert result.breaking["states"].get("http_error", 0) > 0


def test_each_level_carries_the_servers_telemetry(files, tmp_path):
    config = SweepConfig(levels=[2, 12], hold=1.5, settle=0.3, warmup=0)
    with serve_process(profile=str(files["profile"])) as url:
        metrics = url.removesuffix("/v1") + "/metrics"
        scenario = load_scenario(
            files["scenario"],
            {"target.url": ("", url), "telemetry": ("", {"interval": "200ms", "sources": [{"url": metrics}]})},
        )
        result = run_async(run_sweep(scenario, config, tmp_path / "s"))
    low, high = result.levels
    assert high.telemetry["running"]["max"] == 8  # the profile's batch limit, from the server's own gauge
    assert high.telemetry["waiting"]["mean"] > low.telemetry["waiting"]["mean"]
    flat = pq.read_table(tmp_path / "s" / "sweep.parquet").to_pylist()
    assert flat[1]["running_max"] == 8 and "waiting_mean" in flat[1]


def test_the_live_dashboard_follows_a_sweep(files, tmp_path):
    import urllib.request

    from surgelab.dashboard import Dashboard, DashboardSettings

    board = Dashboard(DashboardSettings(port=0, title="sweep"))
    url = board.start()
    try:
        config = SweepConfig(levels=[1, 4], hold=1.2, settle=0.2, warmup=0)
        with serve_process(profile=str(files["profile"])) as target:
            scenario = load_scenario(files["scenario"], {"target.url": ("", target)})
            run_async(run_sweep(scenario, config, tmp_path / "s", on_level=board.on_level, observers=[board]))
        state = json.loads(urllib.request.urlopen(url.split("?")[0].rstrip("/") + "/api/state?since=0", timeout=5).read())
    finally:
        board.stop()
    assert [p["offered"] for p in state["points"]] == [1, 4]  # the growing throughput–latency curve
    assert state["history"] and max(e["ok"] for e in state["history"]) > 0  # live snapshots of the levels
