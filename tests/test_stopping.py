"""Stopping: Ctrl-C, SIGTERM and kill -9 in the middle of a run leave readable records.

Each test starts ``surgelab run --duration 30s`` as a real process, waits until the run
directory exists (the run clock starts then), and signals it a couple of seconds later.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest
import yaml

from surgelab.analysis.summary import RunInfo, summarize
from surgelab.metrics.record import CUT_SHORT
from surgelab.metrics.rundir import read_json
from surgelab.metrics.store import PARTS_DIR, RECORDS_FILE, merge_parts, read_records
from surgelab.scenario.loader import build_scenario

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


class Run:
    def __init__(self, server, out, *flags: str, model: str = "ok", rate: str = "10", max_tokens: str = "16"):
        cmd = [sys.executable, "-m", "surgelab", "run", "--url", server.url, "--model", model, "--rate", rate,
               "--arrival", "constant", "--duration", "30s", "--prompt-tokens", "16", "--max-tokens", max_tokens,
               "--out", str(out), "-q", *flags]  # fmt: skip
        self.out = out
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 15
        while not (out / "run.json").exists():
            assert self.proc.poll() is None, self.proc.communicate()
            assert time.monotonic() < deadline, "the run did not start"
            time.sleep(0.02)
        self.started = time.monotonic()

    def signal_at(self, seconds: float, sig: int) -> float:
        time.sleep(max(self.started + seconds - time.monotonic(), 0))
        self.proc.send_signal(sig)
        return time.monotonic()

    def wait(self, bound: float) -> tuple[int, str, str]:
        try:
            stdout, stderr = self.proc.communicate(timeout=bound)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            stdout, stderr = self.proc.communicate()
            pytest.fail(f"did not exit within {bound}s: {stderr}")
        return self.proc.returncode, stdout, stderr


def _finished(run: Run, reconciled) -> tuple[dict, object]:
    table = pq.read_table(run.out / RECORDS_FILE)  # readable with plain pyarrow
    summary = json.loads((run.out / "summary.json").read_text())
    assert reconciled(summary, run.out).num_rows == table.num_rows
    return summary, table


def test_ctrl_c_with_no_grace_cancels_what_is_in_flight(timed_server, reconciled, tmp_path):
    run = Run(timed_server, tmp_path / "run", "--grace", "0s", model="slow-1", rate="5", max_tokens="20")
    sent_at = run.signal_at(2.0, signal.SIGINT)
    code, stdout, stderr = run.wait(bound=10)
    assert code == 130, stderr
    assert time.monotonic() - sent_at < 3, "with no grace the run ends at once"
    assert "Traceback" not in stderr
    summary, table = _finished(run, reconciled)
    assert summary["stop_reason"] == "interrupted (SIGINT)"
    assert read_json(run.out / "run.json")["stop_reason"] == "interrupted (SIGINT)"
    requests = summary["requests"]
    # 5 req/s for ~2 s, and each would take 19 s: all of them were in flight, all cancelled
    assert 8 <= requests["scheduled"] <= 14
    assert requests["cancelled"] == requests["scheduled"]
    rows = table.to_pylist()
    # the user gave them no time: cut short, which counts neither way (not the target's failure)
    assert all(r["error"] == CUT_SHORT for r in rows)
    assert (requests["cut_short"], requests["unanswered"], requests["error_rate"]) == (requests["scheduled"], 0, 0.0)
    assert all(r["sent_ns"] is not None and r["end_ns"] >= r["sent_ns"] for r in rows)
    assert summary["duration_s"] == pytest.approx(2.0, abs=0.5)  # the window ends at the stop


def test_sigterm_lets_in_flight_requests_finish_within_grace(timed_server, reconciled, tmp_path):
    run = Run(timed_server, tmp_path / "run", "--grace", "5s")  # each request takes 0.5 s
    sent_at = run.signal_at(2.0, signal.SIGTERM)
    code, _, stderr = run.wait(bound=10)
    assert code == 130, stderr
    assert time.monotonic() - sent_at < 2.5
    summary, _ = _finished(run, reconciled)
    assert summary["stop_reason"] == "interrupted (SIGTERM)"
    assert summary["requests"]["cancelled"] == 0
    assert summary["requests"]["ok"] == summary["requests"]["scheduled"] >= 15


def test_second_ctrl_c_skips_the_grace(timed_server, reconciled, tmp_path):
    run = Run(timed_server, tmp_path / "run", "--grace", "60s", model="slow-1", rate="5", max_tokens="20")
    run.signal_at(1.5, signal.SIGINT)
    second = run.signal_at(2.0, signal.SIGINT)
    code, _, stderr = run.wait(bound=10)
    assert code == 130, stderr
    assert time.monotonic() - second < 3
    summary, _ = _finished(run, reconciled)
    assert summary["requests"]["cancelled"] == summary["requests"]["scheduled"] > 0
    assert summary["requests"]["cut_short"] == summary["requests"]["scheduled"], "the second Ctrl-C gave them no time"


def test_requests_still_unanswered_when_a_stops_grace_runs_out_count_against_the_run(timed_server, reconciled, tmp_path):
    """A stop's grace is time the target had: what it did not answer in it is unanswered, not forgotten."""
    run = Run(timed_server, tmp_path / "run", "--grace", "1s", model="slow-1", rate="5", max_tokens="20")
    run.signal_at(1.5, signal.SIGINT)  # each request would take 19 s
    code, _, stderr = run.wait(bound=10)
    assert code == 130, stderr
    summary, table = _finished(run, reconciled)
    requests = summary["requests"]
    assert requests["unanswered"] == requests["cancelled"] == requests["scheduled"] > 0
    assert requests["error_rate"] == 1.0 and requests["cut_short"] == 0
    assert set(table["error"].to_pylist()) == {
        "no answer within the grace period (1s after the run stopped: interrupted (SIGINT), load.grace)"
    }
    assert summary["latency_ms"]["e2e"]["min"] >= 1000, "each waited at least the grace"


def test_kill_9_keeps_every_flushed_part(timed_server, tmp_path):
    """Records are flushed once a second: a SIGKILL loses at most the last interval."""
    run = Run(timed_server, tmp_path / "run")  # 10 req/s, each done 0.5 s after it is due
    killed_at = run.signal_at(2.5, signal.SIGKILL) - run.started
    code, _, _ = run.wait(bound=10)
    assert code == -signal.SIGKILL
    assert not (run.out / RECORDS_FILE).exists()
    assert not (run.out / "summary.json").exists()
    parts = sorted((run.out / PARTS_DIR).glob("part-*.parquet"))
    assert parts
    for part in parts:
        assert pq.read_table(part).num_rows > 0
    table = read_records(run.out)
    ids = set(table["id"].to_pylist())
    # every request that ended more than one flush interval (plus slack) before the kill is on disk
    ended_early = {i for i in range(100) if i / 10 + 0.5 < killed_at - 1.0 - 0.2}
    assert len(ended_early) >= 7
    assert ended_early <= ids
    assert set(table["state"].to_pylist()) == {"ok"}
    assert len(ids) == table.num_rows
    # what a crash left can still be merged and summarised from the run directory alone
    scenario = build_scenario(yaml.safe_load((run.out / "scenario.yaml").read_text()))
    merge_parts(run.out)
    summary = summarize(read_records(run.out), scenario, RunInfo.from_dict(read_json(run.out / "run.json")))
    assert summary["requests"]["scheduled"] == summary["requests"]["ok"] == table.num_rows
    assert summary["stop_reason"].startswith("unknown")
    assert 200 <= summary["latency_ms"]["ttft"]["p50"] < 300  # the precise check is test_run_open_loop's


def test_stop_event_stops_an_in_process_run(zero_server, scenario_for, reconciled, tmp_path):
    import asyncio

    from surgelab.aio import run_async
    from surgelab.runner import run_scenario

    scenario = scenario_for(zero_server.url, load={"rate": 20, "duration": "30s"})

    async def go():
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(1.0, stop.set)
        return await run_scenario(scenario, tmp_path / "run", stop_event=stop)

    started = time.monotonic()
    result = run_async(go())
    assert time.monotonic() - started < 5
    assert result.stop_reason == "stopped"
    reconciled(result.summary, result.run_dir)
    assert result.summary["requests"]["scheduled"] == pytest.approx(20, abs=8)
    assert os.path.exists(result.run_dir / RECORDS_FILE)


@pytest.mark.parametrize("load", [{"concurrency": 2}, {"rate": 4, "arrival": "constant"}])
def test_a_run_never_outlives_its_duration_plus_its_grace(zero_server, scenario_for, run, reconciled, tmp_path, load):
    """A server that stalls every answer used to hold a 1 s run for its 60 s first-token timeout."""
    scenario = scenario_for(
        zero_server.url, model="stall", load={**load, "duration": "1s", "grace": "0.5s"},
        target={"timeouts": {"first_token": "60s"}}, preflight=False,
    )  # fmt: skip
    started = time.monotonic()
    result = run(scenario, tmp_path / "run")
    assert time.monotonic() - started < 4  # 1 s + 0.5 s grace, and the start and the summary
    records = reconciled(result.summary, result.run_dir)
    states = set(records.column("state").to_pylist())
    assert states == {"cancelled"}
    assert result.summary["stop_reason"] == "completed"
