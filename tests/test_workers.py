"""Worker processes split one schedule: the union is exactly the single-process run."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from surgelab.aio import run_async
from surgelab.metrics.live import merge_snapshots
from surgelab.runner.workers import run_with_workers


def _records(run_dir: Path):
    return pq.read_table(run_dir / "records.parquet").sort_by("id")


def test_two_workers_send_exactly_the_single_process_schedule(zero_server, scenario_for, run, reconciled, tmp_path) -> None:
    scenario = scenario_for(
        zero_server.url,
        load={"rate": {"type": "ramp", "start": 10, "end": 60, "over": "2s"}, "duration": "2s"},
        workload={"mix": [{"name": "a", "weight": 2, "prompt_tokens": 10}, {"name": "b", "weight": 1, "prompt_tokens": 30}]},
    )
    one = run(scenario, tmp_path / "one")
    two = run_async(run_with_workers(scenario, tmp_path / "two", 2))
    reconciled(one.summary, tmp_path / "one")
    reconciled(two.summary, tmp_path / "two")
    a, b = _records(tmp_path / "one"), _records(tmp_path / "two")
    assert a.num_rows == b.num_rows == one.summary["requests"]["scheduled"] > 50
    for column in ("id", "intended_ns", "request_class", "prompt_tokens"):
        assert a[column].to_pylist() == b[column].to_pylist(), column
    workers = np.array(b["worker"].to_pylist())
    ids = np.array(b["id"].to_pylist())
    assert set(workers) == {0, 1}
    assert np.all(workers == ids % 2)  # worker k took the requests i ≡ k (mod 2)
    assert two.summary["requests"]["ok"] == two.summary["requests"]["scheduled"]
    assert two.summary["schedule_lag_ms"]["p99"] < 20


def test_closed_loop_users_are_dealt_out_and_never_exceed_n(timed_server, scenario_for, reconciled, tmp_path) -> None:
    scenario = scenario_for(timed_server.url, load={"concurrency": 6, "duration": "2s"}, workload={"output_tokens": 3})
    result = run_async(run_with_workers(scenario, tmp_path / "run", 3))
    table = reconciled(result.summary, tmp_path / "run")
    users, workers = np.array(table["user"].to_pylist()), np.array(table["worker"].to_pylist())
    assert set(users) == set(range(6))
    assert np.all(workers == users % 3)
    sent, end = np.array(table["sent_ns"].to_pylist()), np.array(table["end_ns"].to_pylist())
    events = sorted([(t, 1) for t in sent] + [(t, -1) for t in end], key=lambda e: (e[0], e[1]))
    peak = max(np.cumsum([d for _, d in events]))
    assert peak <= 6
    assert len(set(table["id"].to_pylist())) == table.num_rows


def test_a_stop_decided_by_one_worker_stops_them_all(zero_server, scenario_for, tmp_path) -> None:
    scenario = scenario_for(
        zero_server.url, model="status-500", preflight=False,
        load={"rate": 40, "duration": "20s"},
        thresholds=[{"expr": "error_rate < 10%", "abort_on_fail": True}],
    )  # fmt: skip
    started = time.monotonic()
    result = run_async(run_with_workers(scenario, tmp_path / "run", 2))
    assert result.stop_reason.startswith("aborted")
    assert time.monotonic() - started < 10
    assert not result.summary["thresholds_passed"]


def test_ctrl_c_with_workers_keeps_every_record(timed_server, tmp_path) -> None:
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "surgelab", "run", "--url", timed_server.url, "--model", "slow-1", "--rate", "10",
         "--duration", "30s", "--max-tokens", "50", "--grace", "0s", "--workers", "2", "--out", str(out), "-q"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (out / "run.json").exists():
        time.sleep(0.1)  # the run clock starts with run.json
    time.sleep(3.0)  # both workers have sent about 15 requests each, none of them answered (1 s a token)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    table = pq.read_table(out / "records.parquet")
    states = table["state"].to_pylist()
    assert "cancelled" in states
    assert len(set(table["id"].to_pylist())) == table.num_rows > 10
    assert "Traceback" not in err


def test_live_snapshots_add_up() -> None:
    from surgelab.metrics.live import LiveSnapshot

    def snap(ok: int, failed: int, p99: float) -> LiveSnapshot:
        return LiveSnapshot(1.0, 10.0, "x", 5.0, 4.0, 2, 10, ok, failed, 0, 0, 0.0, 10.0, p99, 20.0, p99, 1.0)

    merged = merge_snapshots([snap(8, 2, 50.0), snap(10, 0, 70.0)])
    assert (merged.ok, merged.failed, merged.in_flight, merged.send_rate) == (18, 2, 4, 10.0)
    assert merged.error_rate == 2 / 20
    assert merged.ttft_p99_ms == 70.0
