"""Scraping during a real run: the server's gauges land in telemetry.parquet and the summary,
and a source that is down, slow or answers garbage never disturbs the load."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from surgelab.server.process import serve_process
from surgelab.telemetry.alerts import slo_alert_rules
from surgelab.telemetry.exporter import METRIC_NAMES, Exporter
from surgelab.telemetry.grafana import dashboard
from surgelab.telemetry.presets import PRESETS

FIXTURE = (Path(__file__).parent / "fixtures" / "vllm.prom").read_bytes()


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        if self.path == "/slow":
            time.sleep(1.5)
        body = b"this is { not prometheus\n" if self.path == "/garbage" else FIXTURE
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def exporter_site() -> Iterator[str]:
    """A loopback HTTP server with a good, a slow and a garbage /metrics."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def embedded() -> Iterator[str]:
    with serve_process(["--max-num-seqs", "4", "--model", "m"], profile="llama2-7b-a10") as url:
        yield url


def test_server_gauges_reach_telemetry_parquet_and_the_summary(embedded, scenario_for, run, reconciled, tmp_path) -> None:
    metrics = embedded.removesuffix("/v1") + "/metrics"
    scenario = scenario_for(
        embedded, model="m",
        load={"concurrency": 8, "duration": "3s"},
        workload={"prompt_tokens": 64, "output_tokens": 32},
        telemetry={"interval": "250ms", "sources": [{"url": metrics, "name": "engine"}]},
    )  # fmt: skip
    result = run(scenario, tmp_path / "run")
    reconciled(result.summary, tmp_path / "run")
    table = pq.read_table(tmp_path / "run" / "telemetry.parquet")
    names = set(table["metric"].to_pylist())
    assert {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "up"} <= names
    telemetry = result.summary["telemetry"]
    assert telemetry["sources"]["engine"]["preset"] == "vllm"
    assert telemetry["sources"]["engine"]["failed"] == 0
    assert telemetry["sources"]["engine"]["scrapes"] >= 8
    roles = telemetry["roles"]
    assert roles["running"]["max"] == 4  # --max-num-seqs 4 with 8 users: the batch is full...
    assert roles["waiting"]["mean"] > 1  # ...and the rest wait
    assert "engine/vllm:generation_tokens_total:rate" in telemetry["series"]
    utilization = result.summary["utilization"]
    assert utilization["slots"] == 4
    # requests waited at the server: what it completed is its capacity, and 8 users offer at least all of it
    # (more in 3 s: the 8 still in flight at the end arrived but did not complete)
    assert utilization["capacity_source"].startswith("measured") and utilization["capacity_rps"] > 0
    assert utilization["capacity_rps"] == result.summary["throughput"]["requests_per_s"]
    assert utilization["offered"] >= 0.9
    assert any("capped" in hint or "waiting" in hint for hint in result.summary["diagnosis"])


def test_down_slow_and_garbage_sources_never_disturb_the_load(exporter_site, zero_server, scenario_for, run, reconciled, tmp_path) -> None:
    sources = [
        {"url": "http://127.0.0.1:9/metrics", "name": "down"},
        {"url": f"{exporter_site}/slow", "name": "slow", "timeout": "300ms"},
        {"url": f"{exporter_site}/garbage", "name": "garbage"},
        {"url": f"{exporter_site}/metrics", "name": "good"},
    ]
    scenario = scenario_for(
        zero_server.url, load={"rate": 40, "duration": "2s", "arrival": "constant"},
        telemetry={"interval": "200ms", "sources": sources},
    )  # fmt: skip
    result = run(scenario, tmp_path / "run")
    reconciled(result.summary, tmp_path / "run")
    summary = result.summary
    assert summary["requests"]["ok"] == summary["requests"]["scheduled"] == 80
    assert summary["schedule_lag_ms"]["p99"] < 20
    sources = summary["telemetry"]["sources"]
    for name, error in (("down", "Connect"), ("slow", "timeout"), ("garbage", "not Prometheus")):
        assert sources[name]["failed"] == sources[name]["scrapes"] > 0
        assert error in sources[name]["gaps"][0]["error"]
    assert sources["good"]["failed"] == 0


def test_the_exporter_serves_the_expected_series(zero_server, scenario_for, run, tmp_path) -> None:
    exporter = Exporter("probe")
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    exporter.serve(port)
    scenario = scenario_for(zero_server.url, load={"rate": 20, "duration": "1s", "arrival": "constant"})
    result = run(scenario, tmp_path / "run", observers=[exporter])
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name in METRIC_NAMES:
        assert name.removesuffix("_total") in families, name
    ok = sum(s.value for s in families["surgelab_requests"].samples if s.labels.get("state") == "ok" and s.name.endswith("_total"))
    assert ok == result.summary["requests"]["ok"] == 20
    ttft_count = next(s.value for s in families["surgelab_ttft_seconds"].samples if s.name.endswith("_count"))
    assert ttft_count == 20


def test_grafana_dashboard_and_alert_rules_are_valid() -> None:
    board = dashboard()
    assert board["schemaVersion"] >= 36 and board["panels"]
    for panel in board["panels"]:
        assert panel["targets"] and all("surgelab_" in t["expr"] for t in panel["targets"])
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"}
    rules = yaml.safe_load(yaml.safe_dump(slo_alert_rules(knee_rps=40, server=PRESETS["vllm"], e2e_p99_s=10)))
    group = rules["groups"][0]
    assert group["name"] and len(group["rules"]) >= 6
    for rule in group["rules"]:
        assert {"alert", "expr", "for", "labels", "annotations"} <= set(rule)
        assert rule["expr"].count("(") == rule["expr"].count(")")
    assert any("32" in r["expr"] for r in group["rules"])  # 80 % of the knee


def test_cli_writes_dashboard_and_rules(cli, tmp_path) -> None:
    import json

    result = cli("grafana", "--out", str(tmp_path / "board.json"))
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "board.json").read_text())["panels"]
    result = cli("alerts", "--ttft-p99", "1.5s", "--knee-rps", "30", "--out", str(tmp_path / "rules.yaml"))
    assert result.returncode == 0, result.stderr
    rules = yaml.safe_load((tmp_path / "rules.yaml").read_text())["groups"][0]["rules"]
    assert any("> 1.5" in r["expr"] for r in rules)
    bad = cli("alerts", "--error-rate", "lots")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_gpu_sampling_without_a_gpu_says_why_and_the_run_goes_on(zero_server, scenario_for, run, reconciled, tmp_path, capsys) -> None:
    scenario = scenario_for(zero_server.url, load={"rate": 10, "duration": "1s"}, telemetry={"nvml": True})
    result = run(scenario, tmp_path / "run")
    reconciled(result.summary, tmp_path / "run")
    assert "telemetry:" in capsys.readouterr().err  # "needs nvidia-ml-py" or "no NVIDIA GPU visible"
    assert result.summary["requests"]["ok"] == result.summary["requests"]["scheduled"]
