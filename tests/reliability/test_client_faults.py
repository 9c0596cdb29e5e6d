"""The client through every fault a target or the network can throw: each request ends in one
classified state, and ``scheduled = ok + failed + dropped + cancelled`` holds every time."""

from __future__ import annotations

import asyncio
import email.utils
import functools
import threading
import time
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from reliability.apps import misbehaving_app, serving
from surgelab.aio import run_async
from surgelab.client.retry import Retrier
from surgelab.client.transport import retry_after_seconds
from surgelab.metrics.record import State
from surgelab.proxy import proxy_process
from surgelab.runner import run_scenario
from surgelab.scenario.model import Retry
from surgelab.server.process import ServerProcess, free_port

STEADY = {"rate": 10, "arrival": "constant", "duration": "1s", "grace": "5s"}
# where the test counts what reached the server, or times events against the run's clock: no /tokenize
# probe before the run (the proxy would count it; the run would start that much later)
NO_PROBE = "builtin"


@pytest.fixture
def scenario_for(scenario_for):
    """These runs inject faults from the first request on and count what reached the server: no pre-flight."""
    return functools.partial(scenario_for, preflight=False)


def _run_against_app(scenario_for, tmp_path, model: str, app=None, **sections):
    """Run a scenario against a misbehaving in-process app; (summary, records as a dict of lists)."""

    async def go():
        async with serving(app or misbehaving_app()) as root:
            scenario = scenario_for(root + "/v1", model, **sections)
            return await run_scenario(scenario, tmp_path / "run")

    result = run_async(go())
    return result.summary, result.run_dir


def test_retry_after_reads_seconds_and_dates() -> None:
    assert retry_after_seconds("2") == 2.0
    assert retry_after_seconds("0.25") == 0.25
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None
    later = email.utils.format_datetime(datetime.now(timezone.utc) + timedelta(seconds=30), usegmt=True)
    assert 25 < retry_after_seconds(later) <= 30
    retrier = Retrier(Retry(backoff={"base": "100ms", "max": "1s"}))
    assert [retrier.delay(n, None) for n in (1, 2, 3, 5)] == [0.1, 0.2, 0.4, 1.0]
    assert retrier.delay(1, 3.0) == 3.0, "a Retry-After longer than the backoff is honoured"


def test_without_a_policy_429_is_counted_on_its_own(scenario_for, reconciled, tmp_path, timed_server) -> None:
    result = run_async(run_scenario(scenario_for(timed_server.url, "status-429", load=STEADY), tmp_path / "run"))
    table = reconciled(result.summary, result.run_dir)
    requests = result.summary["requests"]
    assert requests["rate_limited"] == requests["scheduled"] == requests["by_state"]["http_error"] > 0
    assert requests["retried"] == 0 and set(table["attempts"].to_pylist()) == {1}


def test_a_retried_request_ends_in_one_state_with_its_attempts(scenario_for, reconciled, tmp_path) -> None:
    retry = {"on": [429], "max_attempts": 3, "budget": "100%", "backoff": {"base": "10ms"}}
    summary, run_dir = _run_against_app(
        scenario_for, tmp_path, "limited-1", load=STEADY, target={"retry": retry, "stream": True}
    )
    table = reconciled(summary, run_dir)
    attempts, states = table["attempts"].to_pylist(), table["state"].to_pylist()
    assert set(states) == {"ok"}, "the 429 was retried into a success"
    assert attempts[0] == 2 and set(attempts[1:]) == {1}
    assert summary["requests"]["retried"] == 1 and summary["requests"]["attempts"] == len(states) + 1
    assert summary["requests"]["rate_limited"] == 0, "counted by final answer"
    first = table.slice(0, 1).to_pylist()[0]
    assert (first["end_ns"] - first["sent_ns"]) / 1e9 >= 0.19, "Retry-After 0.2 s was honoured, and sent_ns is the first send"


def test_the_retry_budget_stops_retries_from_multiplying_an_overload(scenario_for, reconciled, tmp_path) -> None:
    retry = {"on": [429], "max_attempts": 5, "budget": "10%", "backoff": {"base": "10ms", "honour_retry_after": False}}
    load = {**STEADY, "rate": 20}
    summary, run_dir = _run_against_app(scenario_for, tmp_path, "limited-100000", load=load, target={"retry": retry})
    table = reconciled(summary, run_dir)
    n = summary["requests"]["scheduled"]
    extra = sum(table["attempts"].to_pylist()) - n
    assert set(table["state"].to_pylist()) == {"http_error"} and summary["requests"]["rate_limited"] == n
    assert 1 <= extra <= max(1, 0.1 * n) + 1, f"{extra} retries for {n} requests under a 10% budget"


def test_a_connection_reset_before_the_answer_is_retried(scenario_for, reconciled, tmp_path) -> None:
    retry = {"on": ["connection_error"], "backoff": {"base": "10ms"}}
    summary, run_dir = _run_against_app(scenario_for, tmp_path, "flaky-1", load=STEADY, target={"retry": retry})
    table = reconciled(summary, run_dir)
    assert set(table["state"].to_pylist()) == {"ok"} and table["attempts"].to_pylist()[0] == 2


def test_connection_reset_mid_stream_through_the_proxy(scenario_for, reconciled, tmp_path, timed_server) -> None:
    root = f"http://127.0.0.1:{timed_server.port}"
    with proxy_process(root, ["--drop", "100%", "--drop-point", "mid-stream"]) as proxy:
        scenario = scenario_for(proxy.root_url + "/v1", "ok", load=STEADY, workload={"output_tokens": 8}, tokenizer=NO_PROBE)
        result = run_async(run_scenario(scenario, tmp_path / "run"))
        stats = proxy.stats()
    table = reconciled(result.summary, result.run_dir)
    rows = table.to_pylist()
    assert {r["state"] for r in rows} == {"connection_error"}
    assert all(r["first_byte_ns"] is not None and r["http_status"] == 200 for r in rows), "the reset came mid-stream"
    assert stats["dropped"] == len(rows)


def test_a_stall_mid_stream_ends_in_the_total_timeout(scenario_for, reconciled, tmp_path, timed_server) -> None:
    root = f"http://127.0.0.1:{timed_server.port}"
    with proxy_process(root, ["--stall-mid-stream", "100%"]) as proxy:
        scenario = scenario_for(proxy.root_url + "/v1", "ok", load={**STEADY, "rate": 4},
                                target={"timeouts": {"first_token": "5s", "total": "1s"}})  # fmt: skip
        result = run_async(run_scenario(scenario, tmp_path / "run"))
    table = reconciled(result.summary, result.run_dir)
    errors = table["error"].to_pylist()
    assert set(table["state"].to_pylist()) == {"timeout"}
    assert all(e.startswith("total timeout after 1s") for e in errors), errors[:2]


def test_the_seeds_network_through_the_proxy(scenario_for, reconciled, tmp_path) -> None:
    """Jitter 50–200 ms and 0.5 % loss in front of the embedded server (the provider seed)."""
    with ServerProcess(profile="tiny") as server, proxy_process(
        server.root_url, ["--latency", "50ms..200ms", "--jitter-per-chunk", "5ms", "--drop", "0.5%", "--seed", "3"]
    ) as proxy:
        scenario = scenario_for(
            proxy.root_url + "/v1", "surgelab-tiny", load={"rate": 20, "duration": "2s", "grace": "5s"}, tokenizer=NO_PROBE
        )
        result = run_async(run_scenario(scenario, tmp_path / "run"))
        stats = proxy.stats()
    table = reconciled(result.summary, result.run_dir)
    assert stats["requests"] == table.num_rows and stats["dropped"] == table["state"].to_pylist().count("connection_error")
    ok = [r for r in table.to_pylist() if r["state"] == "ok"]
    assert ok and min(r["first_token_ns"] - r["sent_ns"] for r in ok) >= 50e6, "no answer beat the added latency"


def test_each_drop_at_the_start_of_a_reused_connection_is_one_error(scenario_for, reconciled, tmp_path) -> None:
    """docs/reliability.md: one connection_error per proxy drop. A drop before the answer on a reused
    keep-alive connection was sent again silently: 5 % start drops read as 0.3 % errors (1 of 20)."""
    with ServerProcess(profile="tiny") as server, proxy_process(
        server.root_url, ["--drop", "20%", "--drop-point", "start", "--seed", "5"]
    ) as proxy:
        scenario = scenario_for(proxy.root_url + "/v1", "surgelab-tiny", preflight=False, tokenizer=NO_PROBE,
                                load={"rate": 30, "arrival": "constant", "duration": "2s", "grace": "5s"})  # fmt: skip
        result = run_async(run_scenario(scenario, tmp_path / "run"))
        stats = proxy.stats()
    table = reconciled(result.summary, result.run_dir)
    states = table["state"].to_pylist()
    assert stats["dropped"] >= 5, stats  # 20 % of 60
    assert states.count("connection_error") == stats["dropped"] and stats["requests"] == table.num_rows == 60
    assert result.summary["requests"]["resent"] == 0


def test_a_huge_json_body_is_bounded(scenario_for, reconciled, tmp_path) -> None:
    summary, run_dir = _run_against_app(
        scenario_for, tmp_path, "huge-json", load={**STEADY, "rate": 3},
        target={"stream": False, "max_response_bytes": 1024 * 1024},
    )  # fmt: skip
    table = reconciled(summary, run_dir)
    assert set(table["state"].to_pylist()) == {"protocol_error"}
    assert all("max_response_bytes" in e for e in table["error"].to_pylist())


def test_an_endless_sse_line_is_bounded(scenario_for, reconciled, tmp_path) -> None:
    started = time.monotonic()
    summary, run_dir = _run_against_app(
        scenario_for, tmp_path, "huge-line", load={**STEADY, "rate": 3}, target={"max_response_bytes": 2 * 1024 * 1024}
    )
    table = reconciled(summary, run_dir)
    assert set(table["state"].to_pylist()) == {"protocol_error"}
    assert all("SSE line longer than" in e for e in table["error"].to_pylist())
    assert time.monotonic() - started < 30, "the client gave up long before the server's 20 s stream"


def test_a_slow_drip_is_reassembled_and_timed(scenario_for, reconciled, tmp_path) -> None:
    summary, run_dir = _run_against_app(scenario_for, tmp_path, "drip-4", load={**STEADY, "rate": 3}, target={"stream": True})
    table = reconciled(summary, run_dir)
    rows = table.to_pylist()
    assert {r["state"] for r in rows} == {"ok"} and {r["output_tokens"] for r in rows} == {4}
    assert all(len(r["itl_us"]) == 3 and min(r["itl_us"]) > 50_000 for r in rows), "one gap per token, each a drip of ~80 bytes"
    summary, run_dir = _run_against_app(
        scenario_for, tmp_path / "again", "drip-4", load={**STEADY, "rate": 3}, target={"timeouts": {"total": "0.3s"}}
    )
    table = reconciled(summary, run_dir)
    assert set(table["state"].to_pylist()) == {"timeout"}
    # "total timeout" once the first token is in; "first token timeout" on a machine too busy for that
    assert all(e.endswith("timeout after 0.3s") for e in table["error"].to_pylist())


def test_the_target_killed_mid_run_and_restarted(scenario_for, reconciled, tmp_path) -> None:
    """The run goes on through the outage; every failure is a classified error; successes return."""
    server = ServerProcess(profile="tiny", port=free_port(), startup_timeout=30)
    server.start()
    events: dict[str, float] = {}
    try:
        scenario = scenario_for(
            server.base_url, "surgelab-tiny",
            load={"rate": 10, "arrival": "constant", "duration": "9s", "grace": "5s"},
            target={"timeouts": {"connect": "1s", "first_token": "3s", "total": "5s"}}, tokenizer=NO_PROBE,
        )  # fmt: skip

        def outage(t0: float) -> None:
            time.sleep(1.5)
            events["killed"] = time.monotonic() - t0
            server.process.kill()  # type: ignore[union-attr]
            server.process.wait(10)  # type: ignore[union-attr]
            time.sleep(1.0)
            server.start()
            events["back"] = time.monotonic() - t0

        async def go():
            thread = threading.Thread(target=outage, args=(time.monotonic(),), daemon=True)
            thread.start()
            result = await run_scenario(scenario, tmp_path / "run")
            await asyncio.to_thread(thread.join, 30)
            return result

        result = run_async(go())
    finally:
        server.__exit__()
    table = reconciled(result.summary, result.run_dir)
    assert "back" in events, "the server came back during the run"
    intended = np.array(table["intended_ns"].to_pylist()) / 1e9
    states = np.array(table["state"].to_pylist())
    assert set(states) <= {"ok", "connection_error", "timeout", "http_error"}
    before = states[intended < events["killed"] - 0.3]
    during = states[(intended > events["killed"] + 0.1) & (intended < events["back"] - 0.1)]
    after = states[intended > events["back"] + 0.5]
    assert before.size and (before == "ok").all(), "all well before the kill"
    errors = np.array(table["error"].to_pylist())[(intended > events["killed"] + 0.1) & (intended < events["back"] - 0.1)]
    assert during.size and (during == "connection_error").all(), ("refused while down, each classified", during, errors)
    assert after.size and (after == "ok").mean() >= 0.9, "recovery shows in the records"
    assert result.summary["stop_reason"] == "completed"
    errors = [r["error"] for r in table.to_pylist() if r["state"] == State.CONNECTION_ERROR.value]
    assert errors and all(errors), "every failure says what went wrong"


@pytest.mark.parametrize("policy", [None, {"on": [503], "max_attempts": 2}])
def test_injected_errors_through_the_proxy_reconcile(scenario_for, reconciled, tmp_path, timed_server, policy) -> None:
    root = f"http://127.0.0.1:{timed_server.port}"
    with proxy_process(root, ["--error-rate", "30%", "--seed", "1"]) as proxy:
        target = {"retry": {**policy, "backoff": {"base": "10ms", "honour_retry_after": False}}} if policy else {}
        scenario = scenario_for(proxy.root_url + "/v1", "ok", load={**STEADY, "rate": 20}, target=target, tokenizer=NO_PROBE)
        result = run_async(run_scenario(scenario, tmp_path / "run"))
        stats = proxy.stats()
    table = reconciled(result.summary, result.run_dir)
    assert stats["requests"] == sum(table["attempts"].to_pylist()), "every attempt reached the proxy"
    by_state = result.summary["requests"]["by_state"]
    assert by_state["ok"] + by_state["http_error"] == table.num_rows
    if policy:
        assert result.summary["requests"]["retried"] >= 1


def test_a_key_echoed_through_the_proxy_and_retried_never_reaches_disk(cli, tmp_path, timed_server) -> None:
    """The secret test under faults: the key is sent through the proxy, echoed back in 401s that
    are retried, and still appears in no file of the run directory and no output."""
    import secrets

    key = "sk-test-" + secrets.token_hex(16)
    root = f"http://127.0.0.1:{timed_server.port}"
    out = tmp_path / "run"
    with proxy_process(root, ["--latency", "5ms..20ms"]) as proxy:
        result = cli("run", "--url", proxy.root_url + "/v1", "--model", "echo-auth", "--api-key-env", "SURGELAB_TEST_KEY",
                     "--rate", "5", "--duration", "1s", "--arrival", "constant", "--out", str(out), "--no-preflight",
                     "--set", "target.retry={on: [401], max_attempts: 2, budget: 100%, backoff: {base: 10ms}}",
                     env={"SURGELAB_TEST_KEY": key}, timeout=60)  # fmt: skip
    assert result.returncode == 1, result.stderr[-2000:]  # every request was refused: the default error bound
    assert timed_server.stats()["authorization"] == f"Bearer {key}", "the key did reach the server"
    files = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.name == "report.html" for p in files) and any(p.name == "records.parquet" for p in files)
    for path in files:
        assert key.encode() not in path.read_bytes(), path
    assert key not in result.stdout and key not in result.stderr
    import pyarrow.parquet as pq

    table = pq.read_table(out / "records.parquet")
    assert set(table["attempts"].to_pylist()) == {2} and all("<redacted>" in e for e in table["error"].to_pylist())
