"""Alert rules and the autoscaler's adapter rule, loaded by Prometheus's own checker (promtool).

Seed 004 writes its alert as "P90 above 1.5 s for 5 minutes"; seed 002 scales on GPU
utilisation above 80 % or on the queue. Each file surgelab writes must load in Prometheus,
not merely look like YAML.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import yaml
from typer.testing import CliRunner

from surgelab.cli import app
from surgelab.sweep.result import LevelRow, SweepResult, write_sweep
from surgelab.telemetry.alert_expr import alert_rule, parse_alert


@pytest.fixture(scope="module")
def promtool():
    path = shutil.which("promtool")
    if path is None:
        (pytest.fail if os.environ.get("CI") else pytest.skip)("promtool not installed (Debian package prometheus)")
    return path


def _check(promtool, path) -> subprocess.CompletedProcess:
    return subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=30)


def test_the_seeds_alert_as_said_becomes_a_rule_prometheus_loads(promtool, tmp_path) -> None:
    said = ["p90(e2e) > 1.5s for 5m", "p99.9(itl) > 200ms for 30s", "mean(ttft) >= 800ms for 10m",
            "error_rate > 1% for 5m", "queue > 10 for 2m", "gpu_util > 90% for 15m", "kv_usage >= 95% for 1m"]  # fmt: skip
    out = CliRunner().invoke(
        app, ["alerts", *[a for r in said for a in ("--rule", r)], "--out", str(tmp_path / "r.yaml")]
    )
    assert out.exit_code == 0, out.output
    checked = _check(promtool, tmp_path / "r.yaml")
    assert checked.returncode == 0 and "SUCCESS: 10 rules found" in checked.stdout, checked.stdout + checked.stderr
    rules = {r["alert"]: r for r in yaml.safe_load((tmp_path / "r.yaml").read_text())["groups"][0]["rules"]}
    seed = rules["InferenceP90E2EAbove1_5"]
    assert seed["for"] == "5m"
    assert seed["expr"] == "histogram_quantile(0.9, sum by (le) (rate(surgelab_e2e_seconds_bucket[5m]))) > 1.5"
    assert rules["InferenceGpuUtilAbove90"]["expr"] == "max by (gpu, Hostname) (DCGM_FI_DEV_GPU_UTIL) > 90"
    assert rules["InferenceKvUsageAbove0_95"]["expr"].endswith(">= 0.95")  # a fraction, as vLLM exports it
    server = alert_rule(parse_alert("p90(e2e) > 1.5s for 5m"), "server")
    assert "vllm:e2e_request_latency_seconds_bucket" in server["expr"]
    built_in = CliRunner().invoke(
        app, ["alerts", "--vllm", "--knee-rps", "40", "--e2e-p99", "10s", "--out", str(tmp_path / "v.yaml")]
    )
    assert built_in.exit_code == 0 and _check(promtool, tmp_path / "v.yaml").returncode == 0


def test_the_checker_rejects_a_broken_expression(promtool, tmp_path) -> None:
    # The check is only worth something if it can fail.
    rule = alert_rule(parse_alert("p90(e2e) > 1.5s for 5m"))
    rule["expr"] = rule["expr"].replace("sum by (le)", "sum by (le")
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"groups": [{"name": "x", "rules": [rule]}]}))
    assert _check(promtool, tmp_path / "bad.yaml").returncode != 0


def test_an_alert_without_its_hold_time_is_one_line() -> None:
    out = CliRunner().invoke(app, ["alerts", "--rule", "p90(e2e) > 1.5s"])
    assert out.exit_code == 2 and "needs 'for DURATION'" in out.output and "Traceback" not in out.output


def _level(i: int, users: float, rps: float, waiting: float) -> LevelRow:
    lat = {
        m: {"mean": 100.0, "p50": 100.0, "p90": 150.0, "p95": 180.0, "p99": 200.0}
        for m in ("ttft", "itl", "tpot", "e2e")
    }
    return LevelRow(i, users, f"level-{i:02d}", "climb", users, rps, rps * 32, rps, 0.0, users, 200, True, [], lat,
                    telemetry={"waiting": {"mean": waiting, "max": waiting * 2, "metric": "vllm:num_requests_waiting"}})  # fmt: skip


@pytest.mark.parametrize(
    ("metric", "name", "target"),
    [("queue", "vllm_num_requests_waiting", "2100m"), ("gpu", "DCGM_FI_DEV_GPU_UTIL", "80")],
)
def test_plan_scales_on_the_queue_or_gpu_through_an_adapter_rule_prometheus_accepts(
    promtool, tmp_path, metric, name, target
) -> None:
    levels = [_level(0, 4, 10.0, 0.0), _level(1, 8, 19.0, 3.0), _level(2, 16, 21.0, 14.0)]
    sweep = SweepResult("s", "concurrency", "users", {}, {}, [], levels, "completed",
                        sla_capacity={"index": 1, "level": 8, "requests_per_s": 19.0, "mean_in_flight": 8.0, "slo": [], "max_error_rate": 0.01})  # fmt: skip
    write_sweep(sweep, tmp_path)
    out = CliRunner().invoke(app, ["plan", str(tmp_path), "--peak", "100", "--hpa-metric", metric,
                                   "--scale-down-window", "10m", "--out", str(tmp_path / "plan")])  # fmt: skip
    assert out.exit_code == 0, out.output
    hpa = yaml.safe_load((tmp_path / "plan" / "hpa.yaml").read_text())["spec"]
    pods = hpa["metrics"][0]["pods"]
    # queue: 3 waiting at the SLA level × 0.7 safety; gpu: seed 002's 80 %
    assert pods == {"metric": {"name": name}, "target": {"type": "AverageValue", "averageValue": target}}
    assert hpa["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 600
    (rule,) = yaml.safe_load((tmp_path / "plan" / "adapter.yaml").read_text())["rules"]
    assert rule["name"]["as"] == name  # the adapter serves the very name the HPA asks for
    query = rule["metricsQuery"].replace("<<.Series>>", rule["seriesQuery"].split("{")[0])
    query = query.replace("<<.LabelMatchers>>", 'namespace="ai",pod=~"vllm-.*"').replace("<<.GroupBy>>", "pod")
    probe = {
        "groups": [
            {
                "name": "adapter",
                "rules": [
                    {"record": "adapter:probe", "expr": query},
                    {"record": "adapter:series", "expr": rule["seriesQuery"]},
                ],
            }
        ]
    }
    (tmp_path / "adapter-probe.yaml").write_text(yaml.safe_dump(probe))
    checked = _check(promtool, tmp_path / "adapter-probe.yaml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert _check(promtool, tmp_path / "plan" / "alerts.yaml").returncode == 0
