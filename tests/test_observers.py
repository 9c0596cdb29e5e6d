"""Every backend feeds the run's observers — surgelab's Prometheus exporter and the live
dashboard — with its records and its live snapshots: one process, worker processes and
compare mode alike (Ray: tests/test_ray.py, where Ray is installed). Before, ``--workers`` gave the exporter only the
snapshots (no request counts, no latency histograms) and compare mode gave nobody anything.
"""

from __future__ import annotations

import io
import json
import socket
import threading
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console
from typer.testing import CliRunner

from surgelab.cli import app
from surgelab.cli.commands_run import execute
from surgelab.dashboard import Dashboard, DashboardSettings


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = s.name + ("{state=" + s.labels["state"] + "}" if "state" in s.labels else "")
            out[key] = out.get(key, 0.0) + s.value
    return out


@pytest.mark.parametrize("workers", [1, 2])
def test_a_run_on_workers_exposes_its_requests_and_latencies_while_it_runs(zero_server, tmp_path, workers) -> None:
    port, seen = _free_port(), []

    def watch() -> None:  # the main thread runs the command (it installs the signal handlers)
        for _ in range(100):  # 10 s at most
            time.sleep(0.1)
            try:
                seen.append(_scrape(port))
            except OSError:
                continue
            if seen[-1].get("surgelab_requests_total{state=ok}", 0) > 0:
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    out = CliRunner().invoke(app, [
        "run", "--url", zero_server.url, "--model", "ok", "--rate", "20", "--arrival", "constant", "--duration", "3s",
        "--prompt-tokens", "16", "--max-tokens", "4", "--workers", str(workers), "--prometheus-port", str(port), "--quiet",
        "--set", "output.flush_interval=0.25s", "--out", str(tmp_path / "run"),
    ])  # fmt: skip
    watcher.join(10)
    assert out.exit_code in (0, 3), out.output  # 3: a busy machine made the client late, not what this checks
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["requests"]["ok"] == summary["requests"]["scheduled"] == 60
    live = seen[-1]
    assert 0 < live.get("surgelab_requests_total{state=ok}", 0) < 60, "no request counted while the run went on"
    after = _scrape(port)
    assert after["surgelab_requests_total{state=ok}"] == 60
    assert after["surgelab_e2e_seconds_count"] == after["surgelab_ttft_seconds_count"] == 60
    assert after["surgelab_itl_seconds_count"] == 60 * 3  # 4 tokens a request: 3 gaps each
    assert after["surgelab_output_tokens_total"] == summary["tokens"]["output_total"]
    assert after["surgelab_run_elapsed_seconds"] > 0


def test_compare_mode_feeds_the_live_dashboard(zero_server, scenario_for, tmp_path) -> None:
    scenario = scenario_for(
        zero_server.url, targets=[{"name": "a", "url": zero_server.url, "model": "ok"},
                                  {"name": "b", "url": zero_server.url, "model": "ok"}],
        routing={"mode": "compare"}, load={"rate": 20, "arrival": "constant", "duration": "2s"}, output={"flush_interval": "0.25s"},
    )  # fmt: skip
    board = Dashboard(DashboardSettings())
    code = execute(scenario, Console(file=io.StringIO()), quiet=True, run_dir=tmp_path / "cmp", observers=[board])
    assert code == 0
    assert board.history, "the dashboard saw no snapshot of a compare run"
    last = board.history[-1]
    assert last["ok"] == 40 and last["recent_n"] > 0  # the first target's requests, with their latencies
