"""`surgelab summarize` rebuilds the summary of a run that was killed outright."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time


def test_summarize_after_kill_9(timed_server, cli, tmp_path) -> None:
    out = tmp_path / "run"
    log = tmp_path / "run.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "surgelab", "run", "--url", timed_server.url, "--model", "ok", "--rate", "20",
             "--duration", "30s", "--max-tokens", "4", "--out", str(out), "-q"],
            stdout=sink, stderr=subprocess.STDOUT,
        )  # fmt: skip
        started = time.monotonic()
        while time.monotonic() - started < 25 and len(list((out / "records.parts").glob("*.parquet"))) < 2:
            time.sleep(0.2)  # two flushes on disk (a busy machine starts the run late)
        parts = sorted(p.name for p in (out / "records.parts").glob("*"))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    waited = time.monotonic() - started
    assert len(parts) >= 2, f"no two flushes in {waited:.1f} s: {parts}\n{log.read_text(errors='replace')}"
    assert not (out / "summary.json").exists()
    result = cli("summarize", str(out))
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    requests = summary["requests"]
    assert requests["scheduled"] >= 10, (parts, waited, log.read_text(errors="replace"))  # two flushes at least
    assert requests["scheduled"] == requests["ok"] + requests["failed"] + requests["dropped"] + requests["cancelled"]
    assert summary["stop_reason"].startswith("unknown")
    assert not (out / "records.parts").exists() and (out / "records.parquet").is_file()


def test_summarize_refuses_a_directory_that_is_not_a_run(cli, tmp_path) -> None:
    result = cli("summarize", str(tmp_path))
    assert result.returncode == 2
    assert "is not a run directory" in result.stderr and "Traceback" not in result.stderr
