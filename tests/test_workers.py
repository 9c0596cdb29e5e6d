"""Worker processes split one schedule: the union is exactly the single-process run."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
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
    before = timed_server.stats()["requests"]
    deadline = time.monotonic() + 60
    # Interrupt once both workers are sending (a dozen requests, none answered: 1 s a token). Waiting a
    # fixed time after run.json is not enough on a loaded machine, where a worker takes seconds to start.
    while time.monotonic() < deadline and timed_server.stats()["requests"] - before < 16:  # pre-flight and /tokenize too
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    table = pq.read_table(out / "records.parquet")
    states = table["state"].to_pylist()
    assert "cancelled" in states
    assert len(set(table["id"].to_pylist())) == table.num_rows > 10
    assert "Traceback" not in err


def test_a_killed_worker_loses_only_its_unflushed_records_and_every_planned_request_is_accounted(
    zero_server, tmp_path
) -> None:
    """SIGKILL of one worker mid-run: the survivor's records are all there, the dead one's flushed
    records too, every planned request has a recorded state and the run is invalid, saying why."""
    out, rate, duration = tmp_path / "run", 40, 4
    proc = subprocess.Popen(
        [sys.executable, "-m", "surgelab", "run", "--url", zero_server.url, "--model", "ok", "--rate", str(rate),
         "--arrival", "constant", "--duration", f"{duration}s", "--workers", "2", "--out", str(out), "-q",
         "--set", "output.flush_interval=0.25s"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    parts = out / "records.parts"
    while time.monotonic() < deadline and min(len(list(parts.glob(f"w00{k}-part-*"))) for k in (0, 1)) < 2:
        time.sleep(0.05)
    flushed = {k: pq.read_table(sorted(parts.glob(f"w00{k}-part-*"))[0]) for k in (0, 1)}  # on disk before the kill
    os.kill(_worker_pids(proc.pid)[0], signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err
    summary = json.loads((out / "summary.json").read_text())
    # invalid (exit 3); and the lost requests did not succeed, so past 10 % of the run they fail its default bound (exit 1)
    assert proc.returncode == (1 if summary["requests"]["error_rate"] >= 0.10 else 3), err
    assert not summary["validity"]["valid"]
    table = _records(out)
    planned = rate * duration
    assert table.num_rows == summary["requests"]["scheduled"] == planned  # every planned request, one state each
    assert sorted(table["id"].to_pylist()) == list(range(planned))
    dead = json.loads((out / "run.json").read_text())["worker_losses"][0]["worker"]
    workers, states = np.array(table["worker"].to_pylist()), np.array(table["state"].to_pylist())
    assert np.all(states[workers == 1 - dead] == "ok")  # the survivor lost nothing
    kept = dict(zip(table["id"].to_pylist(), states))
    assert all(kept[i] == s for i, s in zip(flushed[dead]["id"].to_pylist(), flushed[dead]["state"].to_pylist()))
    lost = table.filter(pc.equal(table["state"], "lost"))
    assert summary["requests"]["lost"] == lost.num_rows > 0 and set(lost["worker"].to_pylist()) == {dead}
    assert summary["requests"]["ok"] + lost.num_rows == planned
    assert summary["requests"]["error_rate"] == lost.num_rows / planned  # requests that did not succeed count
    reason = summary["validity"]["reasons"][0]
    found = re.fullmatch(rf"worker {dead} died at ([\d.]+) s: (\d+) planned requests not sent, (\d+) in flight or unflushed lost", reason)
    assert found, reason
    died_at, not_sent, in_flight = float(found[1]), int(found[2]), int(found[3])
    assert not_sent + in_flight == lost.num_rows
    never_sent = lost.filter(pc.greater_equal(lost["intended_ns"], int(died_at * 1e9) + 50_000_000))
    assert never_sent.num_rows <= not_sent and all(s is None for s in never_sent["sent_ns"].to_pylist())
    assert not_sent > 0  # killed before its share was due
    assert summary["stop_reason"].startswith(f"completed by the other workers (worker {dead} died at")


def _worker_pids(parent: int) -> list[int]:
    """The worker processes (multiprocessing's spawned children) of ``parent``."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and b"spawn_main" in cmdline:
            pids.append(int(entry.name))
    return sorted(pids)


def test_live_snapshots_add_up() -> None:
    from surgelab.metrics.live import LiveSnapshot

    def snap(ok: int, failed: int, p99: float) -> LiveSnapshot:
        return LiveSnapshot(1.0, 10.0, "x", 5.0, 4.0, 2, 10, ok, failed, 0, 0, 0.0, 10.0, p99, 20.0, p99, 1.0)

    merged = merge_snapshots([snap(8, 2, 50.0), snap(10, 0, 70.0)])
    assert (merged.ok, merged.failed, merged.in_flight, merged.send_rate) == (18, 2, 4, 10.0)
    assert merged.error_rate == 2 / 20
    assert merged.ttft_p99_ms == 70.0
