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


def test_the_summary_is_the_same_whatever_calibration_the_machine_has(zero_server, scenario_for, run, cli, tmp_path, monkeypatch) -> None:
    """The client's calibration is context recorded in run.json when the run happens, reported
    beside the summary as recorded: summarising the run directory where no calibration is
    cached, or where a different one is, gives the very same summary.json."""
    from surgelab.runner.headroom import save_calibration

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache-at-run"))
    save_calibration(1, 25.0, [])  # the machine that ran it: 20 req/s is 80 % of its ceiling
    out = tmp_path / "run"
    result = run(scenario_for(zero_server.url, load={"rate": 20, "duration": "1s"}), out)
    recorded = json.loads((out / "run.json").read_text())["client"]
    assert recorded["calibrated_ceiling_rps"] == 25.0 and "add --workers" in recorded["warning"]
    assert result.summary["client"] == recorded

    summaries = []
    for cache, ceiling in (("empty-cache", None), ("other-cache", 10_000.0)):
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / cache))
        if ceiling is not None:
            save_calibration(1, ceiling, [])
        done = cli("summarize", str(out))
        assert done.returncode == 0, done.stderr
        summaries.append(json.loads((out / "summary.json").read_text()))
    assert summaries[0] == summaries[1] == json.loads(json.dumps(result.summary))
    assert summaries[0]["client"] == recorded


def test_a_run_named_before_names_were_slugs_still_summarizes(zero_server, scenario_for, run, tmp_path) -> None:
    """Names are slugs now (issue 29); a run directory saved with a name like 'my test' keeps its summary."""
    import yaml
    from typer.testing import CliRunner

    from surgelab.cli import app

    out = tmp_path / "run"
    measured = run(scenario_for(zero_server.url, load={"rate": 5, "duration": "1s"}), out).summary["requests"]
    saved = yaml.safe_load((out / "scenario.yaml").read_text())
    (out / "scenario.yaml").write_text(yaml.safe_dump({**saved, "name": "my test"}, sort_keys=False))
    (out / "summary.json").unlink()
    result = CliRunner().invoke(app, ["summarize", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "summary.json").read_text())["requests"] == measured
