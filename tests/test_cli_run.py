"""``surgelab run`` end to end as a subprocess: exit codes, thresholds, drops, secrets."""

from __future__ import annotations

import json
import secrets

import pyarrow.parquet as pq
import yaml
from typer.testing import CliRunner

from surgelab.cli import app


def _summary(run_dir):
    return json.loads((run_dir / "summary.json").read_text())


def _flags(server, out, *extra, model="ok", rate="10", duration="2s", max_tokens="4"):
    """These runs test exit codes and secrets, not the client's timing on a busy CI machine (that is
    test_run_open_loop's job), so a 1 s lag bound keeps a slow moment from turning 0 into 3."""
    return ["run", "--url", server.url, "--model", model, "--rate", rate, "--arrival", "constant",
            "--duration", duration, "--prompt-tokens", "16", "--max-tokens", max_tokens, "--out", str(out),
            "--set", "validity.max_lag_p99=1s", *extra]  # fmt: skip


def test_failing_threshold_exits_1(timed_server, cli, reconciled, tmp_path):
    out = tmp_path / "run"
    result = cli(*_flags(timed_server, out, "--threshold", "p99(ttft) < 100ms", "--threshold", "error_rate < 1%", "-q"))
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout.strip() == f"run directory: {out}"
    summary = _summary(out)
    reconciled(summary, out)
    assert summary["thresholds_passed"] is False
    verdicts = {t["expr"]: (t["passed"], t["observed"]) for t in summary["thresholds"]}
    assert verdicts["p99(ttft) < 100ms"][0] is False and verdicts["p99(ttft) < 100ms"][1] >= 0.2
    assert verdicts["error_rate < 1%"] == (True, 0.0)
    assert summary["stop_reason"] == "completed"


def test_abort_on_fail_stops_the_run_early(timed_server, cli, reconciled, tmp_path):
    scenario = {
        "name": "abort",
        "target": {"url": timed_server.url, "model": "ok"},
        "load": {"rate": 20, "arrival": "constant", "duration": "20s"},
        "workload": {"prompt_tokens": 16, "output_tokens": 2},
        "thresholds": [{"expr": "p99(ttft) < 50ms", "abort_on_fail": True}, "error_rate < 1%"],
    }
    path = tmp_path / "abort.yaml"
    path.write_text(yaml.safe_dump(scenario))
    out = tmp_path / "run"
    result = cli("run", str(path), "--out", str(out), "-q")
    assert result.returncode == 1, result.stderr
    assert result.elapsed_s < 8, "a 20 s run stops once the threshold has failed"
    summary = _summary(out)
    reconciled(summary, out)
    assert summary["stop_reason"].startswith("aborted")
    assert "p99(ttft) < 50ms" in summary["stop_reason"]
    assert summary["thresholds_passed"] is False
    assert summary["requests"]["scheduled"] < 20 * 6


def test_drops_at_max_in_flight_make_the_run_invalid(timed_server, cli, reconciled, tmp_path):
    out = tmp_path / "run"
    result = cli(*_flags(timed_server, out, "--max-in-flight", "2", "-q", model="slow-1", rate="20", max_tokens="2"))
    # the dropped requests did not succeed: they fail the default bound (exit 1), and the run is invalid too
    assert result.returncode == 1, result.stderr
    assert "× dropped: max_in_flight (2) reached" in result.stderr
    summary = _summary(out)
    table = reconciled(summary, out)
    requests = summary["requests"]
    assert requests["scheduled"] == 40
    assert requests["dropped"] >= 30
    assert requests["ok"] + requests["dropped"] == 40  # each request takes 1.2 s, so at most 2 + 2 get through
    assert requests["drop_rate"] > 0.5
    dropped = [r for r in table.to_pylist() if r["state"] == "dropped"]
    assert all(r["sent_ns"] is None and r["error"] == "max_in_flight (2) reached" for r in dropped)
    assert summary["validity"]["valid"] is False
    assert any("dropped" in reason for reason in summary["validity"]["reasons"])


def _assert_key_absent(key: str, run_dir, *outputs: str) -> None:
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"scenario.yaml", "run.json", "records.parquet", "summary.json"}
    needle = key.encode()
    for path in files:
        assert needle not in path.read_bytes(), path
        if path.suffix == ".parquet":  # compressed: look at the values too
            assert key not in repr(pq.read_table(path).to_pylist()), path
    for text in outputs:
        assert key not in text


def test_api_key_from_the_environment_never_reaches_disk_or_output(timed_server, cli, reconciled, tmp_path):
    key = "sk-test-" + secrets.token_hex(16)
    out = tmp_path / "run"
    result = cli(*_flags(timed_server, out, "--api-key-env", "SURGELAB_TEST_KEY", "--threshold", "p99(ttft) < 2s",
                         duration="1s"), env={"SURGELAB_TEST_KEY": key})  # fmt: skip
    assert result.returncode == 0, (result.stderr, _summary(out)["validity"])
    assert "TTFT" in result.stdout  # the final summary table was printed
    assert timed_server.stats()["authorization"] == f"Bearer {key}"  # the key was sent
    assert reconciled(_summary(out), out).num_rows == 10
    assert _summary(out)["thresholds_passed"] is True
    _assert_key_absent(key, out, result.stdout, result.stderr)
    saved = yaml.safe_load((out / "scenario.yaml").read_text())
    assert saved["target"]["api_key_env"] == "SURGELAB_TEST_KEY"


def test_api_key_in_a_scenario_header_never_reaches_the_run_directory(timed_server, cli, reconciled, tmp_path):
    key = "sk-test-" + secrets.token_hex(16)
    scenario = {
        "target": {"url": timed_server.url, "model": "ok", "headers": {"Authorization": f"Bearer {key}"}},
        "load": {"rate": 10, "duration": "1s"},
        "workload": {"prompt_tokens": 16, "output_tokens": 4},
        "validity": {"max_lag_p99": "1s"},
    }
    path = tmp_path / "secret.yaml"
    path.write_text(yaml.safe_dump(scenario))
    out = tmp_path / "run"
    result = cli("run", str(path), "--out", str(out))
    assert result.returncode == 0, (result.stderr, _summary(out)["validity"])
    assert timed_server.stats()["authorization"] == f"Bearer {key}"
    reconciled(_summary(out), out)
    _assert_key_absent(key, out, result.stdout, result.stderr)


def test_missing_key_variable_warns_and_runs(zero_server, cli, reconciled, tmp_path):
    out = tmp_path / "run"
    result = cli(*_flags(zero_server, out, "--api-key-env", "SURGELAB_UNSET_VARIABLE", "-q", duration="0.5s"),
                 env={"SURGELAB_UNSET_VARIABLE": ""})  # fmt: skip
    assert result.returncode == 0, (result.stderr, _summary(out)["validity"])
    assert "$SURGELAB_UNSET_VARIABLE is not set" in result.stdout
    assert reconciled(_summary(out), out).num_rows == 5


def test_refuses_an_existing_run_directory(zero_server, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.json").write_text("{}")
    result = CliRunner().invoke(app, _flags(zero_server, out, "-q"))
    assert result.exit_code == 2
    assert "already holds a run" in result.stderr
    assert (out / "summary.json").read_text() == "{}"


def test_a_key_echoed_back_by_the_server_is_scrubbed_from_the_records(zero_server, cli, reconciled, tmp_path):
    key = "sk-test-" + secrets.token_hex(16)
    out = tmp_path / "run"
    result = cli(*_flags(zero_server, out, "--api-key-env", "SURGELAB_TEST_KEY", "-q", "--no-preflight", model="echo-auth",
                         duration="0.5s"), env={"SURGELAB_TEST_KEY": key})  # fmt: skip
    assert result.returncode == 1, (result.stderr, _summary(out)["validity"])  # every request failed: the default bound
    table = reconciled(_summary(out), out)
    assert table["state"].to_pylist() == ["http_error"] * 5
    assert all(e == 'HTTP 401: {"error": {"message": "invalid credential: <redacted>", "type": "scripted"}}'
               for e in table["error"].to_pylist())  # fmt: skip
    _assert_key_absent(key, out, result.stdout, result.stderr)


def test_a_header_key_echoed_back_is_scrubbed_too(zero_server, scenario_for, run, reconciled, tmp_path):
    key = "tok-" + secrets.token_hex(12)
    scenario = scenario_for(zero_server.url, model="echo-auth", target={"headers": {"Authorization": key}},
                            load={"rate": 10, "arrival": "constant", "duration": "0.3s"}, preflight=False)  # fmt: skip
    result = run(scenario, tmp_path / "run")
    table = reconciled(result.summary, result.run_dir)
    assert all("invalid credential: <redacted>" in e for e in table["error"].to_pylist())
    _assert_key_absent(key, result.run_dir)
