"""Alert rules, HPA and adapter manifests from the telemetry presets' roles, for every engine.

vLLM's files are what they were before the rules were built from roles, byte for byte
(``fixtures/vllm-rules-before.json`` was written by the code as it was); another engine's
name that engine's own metrics, and Prometheus's checker loads them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
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
