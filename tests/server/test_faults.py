"""Each fault knob does what it says, against a real ``surgelab serve`` subprocess."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
from http_helpers import Http, burst
from prometheus_client.parser import text_string_to_metric_families

from surgelab.server.process import ServerProcess

CHAT = "/v1/chat/completions"


def body(max_tokens: int = 1, **extra):
    return {
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": max_tokens,
        "ignore_eos": True,
        **extra,
    }


def test_error_rate_is_roughly_right_and_errors_are_json():
    with ServerProcess(["--error-rate", "20%", "--error-status", "503"]) as server:
        replies = burst(server.root_url, CHAT, [body() for _ in range(300)])
    statuses = [r.status for r in replies]
    assert set(statuses) == {200, 503}
    assert 30 <= statuses.count(503) <= 90  # mean 60, four standard deviations either side
    error = next(r for r in replies if r.status == 503).json()["error"]
    assert error["type"] == "server_error" and error["message"]


def test_rate_limit_answers_429_with_retry_after():
    args = ["--max-inflight", "2", "--retry-after", "3s"]
    with ServerProcess(args, profile="llama3-8b-h100") as server:
        replies = burst(server.root_url, CHAT, [body(60) for _ in range(8)])
    limited = [r for r in replies if r.status == 429]
    assert [r.status for r in replies].count(200) == 2 and len(limited) == 6
    assert all(r.headers["Retry-After"] == "3" for r in limited)
    assert limited[0].json()["error"]["type"] == "rate_limit_exceeded"


def test_cold_start_delays_the_first_response_only():
    with ServerProcess(["--cold-start", "1s"]) as server:
        http = Http(server.root_url)
        assert http.get("/health").status == 200  # up, but the model is not loaded yet
        first = http.post(CHAT, body())
        second = http.post(CHAT, body())
    assert first.status == second.status == 200
    assert first.seconds >= 1.0
    assert second.seconds < 0.5


def test_latency_spikes_hit_about_the_configured_fraction():
    with ServerProcess(["--spike-probability", "0.5", "--spike-delay", "400ms"]) as server:
        replies = burst(server.root_url, CHAT, [body() for _ in range(40)])
    slow = [r for r in replies if r.seconds >= 0.4]
    assert all(r.status == 200 for r in replies)
    assert 8 <= len(slow) <= 32
    assert all(r.seconds < 0.3 for r in replies if r not in slow)


def test_fault_file_with_flag_override(tmp_path):
    faults = tmp_path / "faults.yaml"
    faults.write_text("error_rate: 100%\nerror_status: 502\n")
    with ServerProcess(["--faults", str(faults), "--error-status", "504"]) as server:
        replies = burst(server.root_url, CHAT, [body() for _ in range(5)])
    assert [r.status for r in replies] == [504] * 5


def test_crash_exits_the_process():
    server = ServerProcess(["--crash-after", "2s"])
    with server:
        assert Http(server.root_url).post(CHAT, body()).status == 200
        assert server.process.wait(timeout=10) == 1
        assert "crashing" in server.log_tail()
        with pytest.raises(OSError):
            Http(server.root_url).post(CHAT, body(), timeout=2)


def test_stall_stops_answering_without_exiting():
    server = ServerProcess(["--stall-after", "1500ms"])
    with server:
        http = Http(server.root_url)
        assert http.get("/health").status == 200
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            try:
                http.get("/health", timeout=0.3)
            except TimeoutError:
                break
            time.sleep(0.1)
        else:
            pytest.fail("the server never stalled")
        with pytest.raises(TimeoutError):
            http.post(CHAT, body(), timeout=0.5)
        assert server.process.poll() is None
    assert server.process.returncode is not None  # and it still stops when asked


def test_max_num_seqs_makes_requests_wait():
    with ServerProcess(["--max-num-seqs", "2"], profile="llama3-8b-h100") as server:

        async def scrape_under_load() -> dict[str, float]:
            async with aiohttp.ClientSession() as session:
                posts = [asyncio.create_task(session.post(server.root_url + CHAT, json=body(80))) for _ in range(6)]
                await asyncio.sleep(0.3)
                async with session.get(server.root_url + "/metrics") as response:
                    text = await response.text()
                for reply in await asyncio.gather(*posts):
                    assert reply.status == 200
                    reply.release()
            return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}

        gauges = asyncio.run(scrape_under_load())
    assert gauges["vllm:num_requests_running"] == 2
    assert gauges["vllm:num_requests_waiting"] == 4
    assert 0 < gauges["vllm:kv_cache_usage_perc"] < 1


def test_kv_capacity_limits_what_a_request_may_ask_for():
    with ServerProcess(["--kv-capacity", "2048"]) as server:
        http = Http(server.root_url)
        assert http.post(CHAT, body(2000)).status == 200
        reply = http.post(CHAT, body(3000))
    assert reply.status == 400 and "KV cache" in reply.json()["error"]["message"]
