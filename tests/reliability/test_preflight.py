"""Fail loud and safe (issue 20): the pre-flight, exit codes a CI can trust, and bounded waits.

A run against a target that cannot answer used to run its whole duration and exit 0. Now the
pre-flight stops it within seconds with the server's own words (exit 4), a run without the
pre-flight is stopped by the all-failed guard, and a run where requests failed exits 1 by default.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from aiohttp import web

from surgelab.aio import run_async
from surgelab.process import free_port
from surgelab.runner.preflight import PreflightFailed, preflight
from surgelab.runner.workers import run_with_workers

PREFLIGHT_EXIT = 4


def _wait_listening(port: int, deadline_s: float = 15.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port}")


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    """``python -m http.server``: GET works, POST answers 501."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        _wait_listening(port)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def not_http() -> Iterator[str]:
    """A listener that speaks another protocol: it reads the request and answers as Redis would."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(5)
                try:
                    conn.recv(65536)
                    conn.sendall(b"-ERR unknown command 'GET', with args beginning with: '/v1/models'\r\n")
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/v1"
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()


def _run_flags(url: str, out: Path, *extra: str, model: str = "m", duration: str = "30s") -> list[str]:
    return ["run", "--url", url, "--model", model, "--rate", "5", "--arrival", "constant", "--duration", duration, "--prompt-tokens", "16",
            "--max-tokens", "4", "--out", str(out), "-q", *extra]  # fmt: skip


def test_a_dead_port_stops_the_run_within_seconds(cli, tmp_path) -> None:
    """Seen: a dead port (or a 401, a non-HTTP listener, `python -m http.server`) ran the whole duration and exited 0."""
    out = tmp_path / "run"
    result = cli(*_run_flags(f"http://127.0.0.1:{free_port()}/v1", out), timeout=40)
    assert result.returncode == PREFLIGHT_EXIT, result.stderr
    assert result.elapsed_s < 20
    assert result.stderr.startswith("error: pre-flight: http://127.0.0.1:")
    assert "cannot reach it: ConnectionRefusedError: [Errno 111]" in result.stderr  # "Connect call failed (…)"
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not out.exists(), "nothing was run, so no run directory"


def test_python_http_server_answers_501_in_its_own_words(http_server) -> None:
    with pytest.raises(PreflightFailed) as refused:
        run_async(preflight(_scenario(http_server, "m"), quiet=True))
    said = str(refused.value)
    assert "the first request (chat) failed: HTTP 501: Error response Error response Error code: 501" in said
    assert "Message: Unsupported method ('POST')." in said and "<" not in said and "\n" not in said


def test_401_and_a_listener_that_is_not_http_are_said_in_their_own_words(zero_server, not_http) -> None:
    scenario_401 = _scenario(zero_server.url, "status-401")
    with pytest.raises(PreflightFailed) as refused:
        run_async(preflight(scenario_401, quiet=True))
    assert 'the first request (chat) failed: HTTP 401: {"error": {"message": "scripted 401"' in str(refused.value)
    assert "model 'status-401' is not among the models" in str(refused.value) and "'ok'" in str(refused.value)
    with pytest.raises(PreflightFailed) as garbled:
        run_async(preflight(_scenario(not_http, "m"), quiet=True))
    assert "no valid HTTP answer to GET /models: invalid HTTP response" in str(garbled.value)


def test_an_echoed_key_is_scrubbed_from_the_preflight_message(zero_server) -> None:
    key = "sk-preflight-0123456789abcdef"
    with pytest.raises(PreflightFailed) as refused:
        run_async(preflight(_scenario(zero_server.url, "echo-auth"), api_key=key, quiet=True))
    assert "invalid credential: <redacted>" in str(refused.value) and key not in str(refused.value)


def _scenario(url: str, model: str, **sections):
    from surgelab.scenario.loader import build_scenario

    data = {"target": {"url": url, "model": model}, "load": {"rate": 5, "duration": "2s"},
            "workload": {"prompt_tokens": 16, "output_tokens": 4}, **sections}  # fmt: skip
    return build_scenario(data, source="test")


def test_without_a_model_the_only_one_served_is_used_and_the_check_is_not_a_record(zero_server, scenario_for, run, tmp_path):
    before = zero_server.stats()["requests"]
    result = run(scenario_for(zero_server.url, model="", load={"rate": 10, "duration": "0.5s"}), tmp_path / "run")
    saved = (result.run_dir / "scenario.yaml").read_text()
    assert "model: ok" in saved
    scheduled = result.summary["requests"]["scheduled"]
    assert result.summary["requests"]["ok"] == scheduled == pq.read_table(result.run_dir / "records.parquet").num_rows
    assert zero_server.stats()["requests"] - before == scheduled + 1, "one pre-flight request, not in the records"


def test_several_models_or_a_wrong_one_are_named() -> None:
    async def main() -> tuple[str, str]:
        async def models(_request: web.Request) -> web.Response:
            return web.json_response({"object": "list", "data": [{"id": "llama-8b"}, {"id": "qwen-7b"}]})

        async def chat(request: web.Request) -> web.Response:
            model = (await request.json())["model"]
            return web.json_response({"error": {"message": f"The model `{model}` does not exist."}}, status=404)

        app = web.Application()
        app.router.add_get("/v1/models", models)
        app.router.add_post("/v1/chat/completions", chat)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/v1"  # type: ignore[union-attr]
        messages = []
        try:
            for model in ("", "llama-3-8b"):
                try:
                    await preflight(_scenario(url, model), quiet=True)
                except PreflightFailed as exc:
                    messages.append(str(exc))
        finally:
            await runner.cleanup()
        return messages[0], messages[1]

    none_given, wrong = asyncio.run(main())
    assert re.fullmatch(r"no model given and http://127\.0\.0\.1:\d+/v1 serves 2: 'llama-8b', 'qwen-7b'; give --model NAME", none_given)
    assert "HTTP 404: {\"error\": {\"message\": \"The model `llama-3-8b` does not exist.\"}}" in wrong
    assert "(model 'llama-3-8b' is not among the models" in wrong and "lists: 'llama-8b', 'qwen-7b')" in wrong


def test_workers_and_sweep_check_the_target_too(cli, tmp_path) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    started = time.monotonic()
    with pytest.raises(PreflightFailed, match="ConnectionRefusedError"):
        run_async(run_with_workers(_scenario(dead, "m"), tmp_path / "w", 2))
    assert time.monotonic() - started < 15 and not (tmp_path / "w").exists(), "no worker was started"
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"target: {{url: '{dead}', model: m}}\nload: {{rate: 1, duration: 10s}}\n")
    sweep = cli("sweep", str(scenario), "--levels", "1,2", "--hold", "5s", "--warmup", "0", "--out", str(tmp_path / "sw"),
                "-q", timeout=40)  # fmt: skip
    assert sweep.returncode == PREFLIGHT_EXIT and "pre-flight:" in sweep.stderr, sweep.stderr
    assert "ConnectionRefusedError" in sweep.stderr and sweep.elapsed_s < 20


def test_compare_checks_every_target_and_route_needs_one(zero_server) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    targets = [{"name": "up", "url": zero_server.url, "model": "ok"}, {"name": "down", "url": dead, "model": "ok"}]
    compare = _scenario(zero_server.url, "ok", targets=targets)
    with pytest.raises(PreflightFailed, match=r"^target down: http://127\.0\.0\.1:\d+/v1: cannot reach it: ConnectionRefused"):
        run_async(preflight(compare, quiet=True))
    route = _scenario(zero_server.url, "ok", targets=targets, routing={"mode": "route"})
    assert run_async(preflight(route, quiet=True)).preflight_done  # failover is what a route run tests


def test_without_preflight_a_dead_target_is_stopped_by_the_all_failed_guard(cli, tmp_path) -> None:
    """--no-preflight: the guard needs only 10 failures with no success (not 200 in 10 s) at any rate."""
    out = tmp_path / "run"
    result = cli(*_run_flags(f"http://127.0.0.1:{free_port()}/v1", out, "--no-preflight", duration="60s"), timeout=40)
    assert result.returncode == 1, result.stderr
    assert result.elapsed_s < 20
    assert (
        "failed: aborted: guard: the first 10 requests all failed (guards.abort.all_failed: 10); the last: "
        "ConnectionRefusedError: [Errno 111]"
    ) in result.stderr
    summary = json.loads((out / "summary.json").read_text())
    default = [t for t in summary["thresholds"] if t["default"]]
    assert [(t["expr"], t["observed"], t["passed"]) for t in default] == [("error_rate < 10%", 1.0, False), ("ok > 0", 0, False)]


def test_a_stalled_server_holds_a_5s_run_for_5s_plus_grace_and_it_fails(zero_server, scenario_for, run, tmp_path) -> None:
    """Seen: a server that stalls held an 8 s run for 60-300 s (each request waiting for its 60 s first-token
    timeout), and the run exited 0. The server here accepts every request and never answers."""
    scenario = scenario_for(zero_server.url, model="stall", preflight=False,  # the pre-flight would stop it at once
                            load={"rate": 4, "arrival": "constant", "duration": "5s", "grace": "1s"},
                            target={"timeouts": {"first_token": "60s"}})  # fmt: skip
    started = time.monotonic()
    result = run(scenario, tmp_path / "run")
    run_info = json.loads((result.run_dir / "run.json").read_text())
    assert run_info["wall_s"] < 5 + 1 + 0.5, "the run ends at its duration plus its grace"
    assert time.monotonic() - started < 5 + 1 + 4, "and returns soon after (start, summary)"
    records = pq.read_table(result.run_dir / "records.parquet").to_pylist()
    assert len(records) == 20 and {r["state"] for r in records} == {"cancelled"}
    assert {r["error"] for r in records} == {"no answer by the end of the grace period (1s after the planned end, load.grace)"}
    failed = [(t["expr"], t["passed"]) for t in result.summary["thresholds"] if t["default"]]
    assert ("ok > 0", False) in failed and not result.thresholds_passed, "surgelab run exits 1"


def test_the_check_warms_no_prefix_of_the_run() -> None:
    """The check is the run's first request with a prompt of its own: the server's prefix cache holds
    nothing of the run's prompts (nor its shared system prompt) before the run starts."""
    from surgelab.load.phases import plan_phases
    from surgelab.runner.preflight import preflight_request

    scenario = _scenario("http://127.0.0.1:1/v1", "m", workload={
        "prompt_tokens": 300, "output_tokens": 200, "system_prompt_tokens": 50,
        "shared_prefix": {"tokens": 100, "fraction": 1.0}, "sampling": {"temperature": 0.5}})  # fmt: skip
    first = plan_phases(scenario)[0].sampler.spec(0)
    check = preflight_request(scenario)
    assert check.prompt.split()[0] != first.prompt.split()[0] and not check.system_prompt and not check.history
    assert check.max_tokens == 1 and check.prompt_tokens <= 24  # a few words and a random 8-hex-digit tag
    assert (check.kind, check.endpoint, dict(check.extra)) == (first.kind, first.endpoint, dict(first.extra))
