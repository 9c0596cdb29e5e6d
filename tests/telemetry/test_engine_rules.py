"""Alert rules, HPA and adapter manifests from the telemetry presets' roles, for every engine.

vLLM's files are what they were before the rules were built from roles, byte for byte
(``fixtures/vllm-rules-before.json`` was written by the code as it was); another engine's
name that engine's own metrics, and Prometheus's checker loads them.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from surgelab.cli import app

BEFORE = Path(__file__).parent / "fixtures" / "vllm-rules-before.json"
_SAID = ["p90(e2e) > 1.5s for 5m", "p99.9(itl) > 200ms for 30s", "mean(ttft) >= 800ms for 10m", "error_rate > 1% for 5m",
         "queue > 10 for 2m", "gpu_util > 90% for 15m", "kv_usage >= 95% for 1m", "running < 1 for 10m"]  # fmt: skip
_ALERTS = {
    "alerts-default": [],
    "alerts-vllm-knee": ["--vllm", "--knee-rps", "40", "--e2e-p99", "10s", "--error-rate", "2%", "--for-minutes", "3"],
    "alerts-rules-client": [a for r in _SAID for a in ("--rule", r)],
    "alerts-rules-server": [*(a for r in _SAID for a in ("--rule", r)), "--source", "server", "--window", "2m"],
}
_PLANS = {
    "plan-rps": ["--hpa-metric", "rps"],
    "plan-inflight": ["--hpa-metric", "inflight", "--hpa-target", "6"],
    "plan-queue": ["--hpa-metric", "queue", "--hpa-target", "4", "--namespace", "ai"],
    "plan-gpu": ["--hpa-metric", "gpu", "--hpa-metric-name", "gpu_busy"],
}


def _outputs(tmp_path: Path, extra: list[str] = (), cases: tuple[str, ...] | None = None) -> dict[str, str]:
    """Each case's files as text: ``surgelab alerts`` output, and a plan's hpa, adapter and alerts."""
    runner, out = CliRunner(), {}
    for name, args in _ALERTS.items():
        if cases is None or name in cases:
            result = runner.invoke(app, ["alerts", *args, *extra, "--out", str(tmp_path / f"{name}.yaml")])
            assert result.exit_code == 0, result.output
            out[name] = (tmp_path / f"{name}.yaml").read_text()
    for name, args in _PLANS.items():
        if cases is None or name in cases:
            plan = tmp_path / name
            cmd = ["plan", "--capacity", "12.5", "--peak", "100", "--slo", "p99(ttft) < 500ms", *args, *extra]
            result = runner.invoke(app, [*cmd, "--out", str(plan)])
            assert result.exit_code == 0, result.output
            for file in ("hpa.yaml", "adapter.yaml", "alerts.yaml"):
                out[f"{name}/{file}"] = (plan / file).read_text()
    return out


def test_vllm_files_are_what_they_were_before_byte_for_byte(tmp_path) -> None:
    assert _outputs(tmp_path) == json.loads(BEFORE.read_text())


def _names(text: str, prefix: str) -> set[str]:
    return set(re.findall(re.escape(prefix) + r"[A-Za-z0-9_:]+", text))


@pytest.mark.parametrize(
    ("engine", "prefix", "expected"),
    [
        ("sglang", "sglang", {"sglang:num_requests_total", "sglang:num_queue_reqs", "sglang:num_running_reqs",
                              "sglang_num_running_reqs", "sglang_requests_per_second", "sglang_num_queue_reqs", "sglang:time_to_first_token_seconds_bucket"}),
        ("tgi", "tgi_", {"tgi_request_success", "tgi_queue_size", "tgi_batch_current_size", "tgi_requests_per_second"}),
    ],
)  # fmt: skip
def test_a_plan_for_another_engine_names_that_engines_metrics(tmp_path, engine, prefix, expected) -> None:
    files = _outputs(tmp_path, ["--engine", engine], cases=("plan-rps", "plan-inflight", "plan-queue"))
    text = "\n".join(files.values())
    assert "vllm" not in text
    assert _names(text, prefix) == expected
    assert (
        f"sum by (pod) (rate({'sglang:num_requests_total' if engine == 'sglang' else 'tgi_request_success'}[2m]))"
        in text
    )


def test_tgi_has_no_ttft_histogram_so_its_plan_says_the_rule_is_left_out(tmp_path) -> None:
    out = CliRunner().invoke(app, ["plan", "--capacity", "12.5", "--peak", "100", "--slo", "p99(ttft) < 500ms",
                                   "--engine", "tgi", "--out", str(tmp_path / "p")])  # fmt: skip
    assert out.exit_code == 0, out.output
    assert "tgi exports no TTFT histogram" in out.output
    rules = yaml.safe_load((tmp_path / "p" / "alerts.yaml").read_text())["groups"][0]["rules"]
    assert [r["alert"] for r in rules] == [
        "InferenceNearKnee",
        "InferenceAboveSlaCapacity",
        "InferenceQueueNotDraining",
    ]


def test_an_engine_without_what_a_plan_reads_is_one_line_and_nothing_is_written(tmp_path) -> None:
    out = CliRunner().invoke(app, ["plan", "--capacity", "10", "--peak", "100", "--engine", "llamacpp",
                                   "--out", str(tmp_path / "p")])  # fmt: skip
    assert out.exit_code == 2 and "llamacpp exports no completed-requests counter" in out.output, out.output
    assert not (tmp_path / "p").exists() and "Traceback" not in out.output
    unknown = CliRunner().invoke(app, ["plan", "--capacity", "10", "--peak", "100", "--engine", "vllm2"])
    assert unknown.exit_code == 2 and "--engine: expected one of vllm, sglang, tgi" in unknown.output


def test_alerts_on_an_sglang_server_read_its_own_histograms_and_gauges(tmp_path) -> None:
    said = ["p90(e2e) > 1.5s for 5m", "queue > 10 for 2m", "kv_usage >= 95% for 1m"]
    out = CliRunner().invoke(app, ["alerts", "--engine", "sglang", "--knee-rps", "40", "--source", "server",
                                   *(a for r in said for a in ("--rule", r)), "--out", str(tmp_path / "r.yaml")])  # fmt: skip
    assert out.exit_code == 0, out.output
    rules = {r["alert"]: r["expr"] for r in yaml.safe_load((tmp_path / "r.yaml").read_text())["groups"][0]["rules"]}
    assert rules["SGLangServerTTFTP99AboveSLO"].startswith(
        "histogram_quantile(0.99, sum by (le) (rate(sglang:time_to_first_token_seconds_bucket[5m])))"
    )
    assert (
        "sglang:num_queue_reqs" in rules["SGLangRequestsWaiting"]
        and "sglang:token_usage" in rules["SGLangRequestsWaiting"]
    )
    assert "sum(rate(sglang:e2e_request_latency_seconds_count[5m])) > 32" in rules["ThroughputNearKnee"]
    assert "sglang:e2e_request_latency_seconds_bucket" in rules["InferenceServerP90E2EAbove1_5"]
    assert rules["InferenceQueueAbove10"] == "max by (pod) (sglang:num_queue_reqs) > 10"
    assert rules["InferenceKvUsageAbove0_95"] == "max by (pod) (sglang:token_usage) >= 0.95"
    assert "vllm" not in (tmp_path / "r.yaml").read_text()
    no_errors = CliRunner().invoke(
        app, ["alerts", "--engine", "sglang", "--source", "server", "--rule", "error_rate > 1% for 5m"]
    )
    assert no_errors.exit_code == 2 and "sglang exports no failed-requests counter" in no_errors.output


@pytest.fixture(scope="module")
def promtool():
    path = shutil.which("promtool")
    if path is None:
        pytest.skip("promtool not installed (Debian package prometheus)")
    return path


@pytest.mark.parametrize("engine", ["sglang", "tgi"])
def test_prometheus_loads_another_engines_rules(promtool, tmp_path, engine) -> None:
    files = _outputs(tmp_path, ["--engine", engine], cases=("plan-queue",))
    said = [a for r in ("p90(e2e) > 1.5s for 5m", "queue > 10 for 2m", "running < 1 for 10m") for a in ("--rule", r)]
    out = CliRunner().invoke(app, ["alerts", "--engine", engine, "--knee-rps", "40", "--source", "server", *said,
                                   "--out", str(tmp_path / "alerts.yaml")])  # fmt: skip
    assert out.exit_code == 0, out.output
    for name in ("alerts.yaml", "plan-queue/alerts.yaml"):
        checked = subprocess.run(
            [promtool, "check", "rules", str(tmp_path / name)], capture_output=True, text=True, timeout=30
        )
        assert checked.returncode == 0 and "SUCCESS" in checked.stdout, checked.stdout + checked.stderr
    assert engine in files["plan-queue/alerts.yaml"] and engine in (tmp_path / "alerts.yaml").read_text()
