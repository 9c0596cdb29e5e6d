"""Failures through the whole runner: each lands in its state, in the records and the summary."""

from __future__ import annotations

import pytest

CASES = [
    ("status-500", {}, "http_error"),
    ("status-429", {}, "http_error"),
    ("stall", {"timeouts": {"first_token": "300ms"}}, "timeout"),
    ("reset", {}, "connection_error"),
    ("garbage", {}, "protocol_error"),
    ("no-done", {}, "protocol_error"),
    ("no-usage", {}, "ok"),
]


@pytest.mark.parametrize(("model", "target", "state"), CASES, ids=[c[0] for c in CASES])
def test_state_reaches_records_and_summary(zero_server, scenario_for, run, reconciled, tmp_path, model, target, state):
    scenario = scenario_for(zero_server.url, model=model, target=target,
                            load={"rate": 10, "arrival": "constant", "duration": "0.5s"},
                            workload={"output_tokens": 6}, preflight=False)  # fmt: skip
    result = run(scenario, tmp_path / "run")
    table = reconciled(result.summary, result.run_dir)
    assert table["state"].to_pylist() == [state] * 5
    requests = result.summary["requests"]
    assert requests["by_state"][state] == 5
    if state == "ok":
        assert table["usage_source"].to_pylist() == ["counted"] * 5
        assert table["output_tokens"].to_pylist() == [6] * 5
        assert requests["error_rate"] == 0.0
    else:
        assert requests["failed"] == 5 and requests["error_rate"] == 1.0
        assert all(table["error"].to_pylist())
        ttft = result.summary["latency_ms"]["ttft"]
        if state == "timeout":  # given up on: each counts as its wait, at least the 300 ms first-token timeout
            assert ttft["count"] == ttft["censored"] == 5 and ttft["min"] >= 290  # the timer grain is 1 ms
        else:  # an error that came back is an answer, not a wait
            assert ttft["count"] == 0
        assert result.summary["throughput"]["requests_per_s"] == 0.0
    if model.startswith("status-"):
        assert table["http_status"].to_pylist() == [int(model[7:])] * 5


def test_refused_connections_through_the_runner(scenario_for, run, reconciled, tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    scenario = scenario_for(
        f"http://127.0.0.1:{port}/v1", load={"rate": 10, "arrival": "constant", "duration": "0.5s"}, preflight=False
    )
    result = run(scenario, tmp_path / "run")
    table = reconciled(result.summary, result.run_dir)
    assert table["state"].to_pylist() == ["connection_error"] * 5


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_no_stream_and_completions_from_the_command_line(zero_server, cli, reconciled, tmp_path, endpoint):
    import json

    out = tmp_path / "run"
    result = cli("run", "--url", zero_server.url, "--model", "ok", "--rate", "10", "--duration", "0.5s",
                 "--arrival", "constant", "--max-tokens", "7", "--no-stream", "--endpoint", endpoint,
                 "--set", "validity.max_lag_p99=1s", "--out", str(out), "-q")  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    reconciled(summary, out)
    assert summary["requests"]["ok"] == 5
    assert summary["target"]["stream"] is False and summary["target"]["endpoint"] == endpoint
    assert summary["tokens"]["output_total"] == 35 and summary["tokens"]["usage_source"] == {"server": 5}
    assert summary["latency_ms"]["itl"]["count"] == 0 and summary["latency_ms"]["tpot"]["count"] == 0
    assert summary["latency_ms"]["e2e"]["count"] == 5


def test_a_client_that_raises_is_not_recorded_as_ok(zero_server, scenario_for, run, reconciled, tmp_path, monkeypatch):
    """send() never raises by contract; if a bug makes it raise, the record must not say ok."""
    from surgelab.client.openai import OpenAIClient

    async def broken(self, spec, out, at_ns=None):
        out.sent_ns = 1
        raise RuntimeError("bug in the client")

    monkeypatch.setattr(OpenAIClient, "send", broken)
    for load in ({"rate": 10, "arrival": "constant", "duration": "0.3s"}, {"concurrency": 2, "duration": "0.2s"}):
        result = run(scenario_for(zero_server.url, load=load, preflight=False), tmp_path / str(len(load)))
        table = reconciled(result.summary, result.run_dir)
        assert table.num_rows >= 2
        assert set(table["state"].to_pylist()) == {"protocol_error"}
        assert set(table["error"].to_pylist()) == {"client error: RuntimeError: bug in the client"}
