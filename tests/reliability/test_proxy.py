"""The fault-injection proxy: each fault does what it says, streams stay incremental, seeds repeat."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import orjson
import pytest

from reliability.apps import misbehaving_app, proxying, serving
from surgelab.aio import run_async
from surgelab.proxy import Faults, ProxyConfigError, Schedule, read_schedule
from surgelab.proxy.faults import parse_bandwidth, parse_latency

CHAT = {"model": "ok", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 10, "stream": True}


def test_knobs_parse_in_human_units() -> None:
    assert parse_latency("50ms..200ms") == (0.05, 0.2)
    assert parse_latency("100ms") == (0.1, 0.1)
    assert parse_bandwidth("1MB/s") == 1e6
    assert parse_bandwidth("512KiB/s") == 512 * 1024
    assert parse_bandwidth("8Mbit/s") == 1e6
    faults = Faults.from_mapping({"latency": "50ms..200ms", "drop": "0.3%", "jitter-per-chunk": "5ms", "error_rate": 0.01})
    assert faults.drop == pytest.approx(0.003) and faults.jitter_per_chunk == 0.005 and faults.error_rate == 0.01
    assert "latency 50ms..200ms" in faults.describe()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"drop": "150%"}, "drop: must be between 0 and 1"),
        ({"latency": "200ms..50ms"}, "low..high"),
        ({"lag": "1s"}, "flags.lag: unknown fault"),
        ({"bandwidth": "fast"}, "expected a bandwidth"),
        ({"drop_point": "middle"}, "drop_point: one of"),
        ({"error_status": 200}, "error_status: must be an HTTP error status"),
        ({"latency": True}, "latency"),
    ],
)
def test_bad_knobs_name_the_knob(raw: dict, message: str) -> None:
    with pytest.raises(ProxyConfigError, match=message):
        Faults.from_mapping(raw, where="flags")


def test_schedule_windows_override_the_base(tmp_path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("- {at: 10s, until: 30s, faults: {error_rate: 1%}}\n- {at: 20s, faults: {drop: 50%}}\n")
    schedule = read_schedule(path, Faults(latency=(0.05, 0.05)))
    assert schedule.at(0) == Faults(latency=(0.05, 0.05))
    assert schedule.at(15).error_rate == 0.01 and schedule.at(15).latency == (0.05, 0.05)
    assert schedule.at(25).drop == 0.5 and schedule.at(25).error_rate == 0.0  # the later window wins
    assert schedule.at(3600).drop == 0.5
    path.write_text("- {at: 30s, until: 10s}\n")
    with pytest.raises(ProxyConfigError, match=r"s.yaml\[0\]: until"):
        read_schedule(path)
    path.write_text("- {at: 1s, faults: {drop: lots}}\n")
    with pytest.raises(ProxyConfigError, match=r"\[0\].faults.drop"):
        read_schedule(path)


async def _stream(url: str, body: dict, timeout: float = 20) -> tuple[int, list[float], bytes]:
    """(status, arrival time of every chunk, whole body) of one streamed POST."""
    started = time.monotonic()
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session,
        session.post(url + "/v1/chat/completions", data=orjson.dumps(body)) as resp,
    ):
        arrivals, data = [], b""
        async for piece in resp.content.iter_any():
            arrivals.append(time.monotonic() - started)
            data += piece
        return resp.status, arrivals, data


def test_sse_passes_through_incrementally_with_latency_and_jitter(timed_server) -> None:
    upstream = f"http://127.0.0.1:{timed_server.port}"

    async def go() -> tuple[int, list[float], bytes]:
        faults = Faults(latency=(0.1, 0.15), jitter_per_chunk=0.005)
        async with proxying(upstream, Schedule(faults)) as (url, proxy):
            result = await _stream(url, CHAT)
            assert proxy.stats.forwarded == 1 and proxy.stats.chunks >= 10
            return result

    status, arrivals, data = run_async(go())
    assert status == 200 and data.endswith(b"data: [DONE]\n\n") and data.count(b"data:") >= 11
    # The scripted server spaces 10 tokens 20 ms apart after a 200 ms first token: a buffering
    # proxy would deliver them in one piece at the end. Lower bounds only (a busy machine is slower).
    assert arrivals[0] >= 0.1 + 0.2, "added latency plus the server's first token"
    assert arrivals[-1] - arrivals[0] >= 0.1, "chunks arrive spread out, not all at the end"
    assert len(arrivals) >= 5


def test_injected_errors_answer_without_the_upstream(timed_server) -> None:
    upstream = f"http://127.0.0.1:{timed_server.port}"

    async def go() -> list[tuple[int, str | None]]:
        async with proxying(upstream, Schedule(Faults(error_rate=1.0, error_status=503))) as (url, proxy):
            async with aiohttp.ClientSession() as session:
                out = []
                for _ in range(3):
                    async with session.post(url + "/v1/chat/completions", data=orjson.dumps(CHAT)) as resp:
                        out.append((resp.status, resp.headers.get("Retry-After")))
            assert proxy.stats.injected_errors == 3 and proxy.stats.forwarded == 0
            return out

    assert run_async(go()) == [(503, "1")] * 3


@pytest.mark.parametrize("point", ["start", "mid-stream"])
def test_drops_abort_the_connection(timed_server, point: str) -> None:
    upstream = f"http://127.0.0.1:{timed_server.port}"

    async def go() -> tuple[bytes, BaseException | None]:
        async with proxying(upstream, Schedule(Faults(drop=1.0, drop_point=point))) as (url, proxy):
            got, error = b"", None
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
                try:
                    async with session.post(url + "/v1/chat/completions", data=orjson.dumps(CHAT)) as resp:
                        async for piece in resp.content.iter_any():
                            got += piece
                except (aiohttp.ClientError, OSError) as exc:
                    error = exc
            assert proxy.stats.dropped == 1
            return got, error

    got, error = run_async(go())
    assert error is not None, "a dropped connection is an error, never a clean end"
    assert isinstance(error, (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, OSError))
    if point == "mid-stream":
        assert got.startswith(b"data:"), "the first chunk got through before the reset"
    else:
        assert got == b""


def test_stall_mid_stream_holds_the_connection_until_the_client_gives_up(timed_server) -> None:
    upstream = f"http://127.0.0.1:{timed_server.port}"

    async def go() -> tuple[bytes, float]:
        async with proxying(upstream, Schedule(Faults(stall_mid_stream=1.0))) as (url, proxy):
            got, started = b"", time.monotonic()
            with pytest.raises(asyncio.TimeoutError):
                async with (
                    aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1.5)) as session,
                    session.post(url + "/v1/chat/completions", data=orjson.dumps(CHAT)) as resp,
                ):
                    async for piece in resp.content.iter_any():
                        got += piece
            assert proxy.stats.stalled == 1
            return got, time.monotonic() - started

    got, waited = run_async(go())
    assert got.startswith(b"data:") and got.count(b"data:") == 1
    assert waited >= 1.4


def test_bandwidth_limit_paces_a_large_body() -> None:
    async def go() -> tuple[int, float]:
        async with serving(misbehaving_app()) as upstream, proxying(upstream, Schedule(Faults(bandwidth=1_000_000))) as (url, _):
            started = time.monotonic()
            async with aiohttp.ClientSession() as session, session.get(url + "/big?bytes=600000") as resp:
                body = await resp.read()
            return len(body), time.monotonic() - started

    size, seconds = run_async(go())
    assert size == 600_000
    assert seconds >= 0.5, "600 kB at 1 MB/s cannot take less than 0.6 s"


def test_schedule_switches_faults_on_and_off(timed_server) -> None:
    upstream = f"http://127.0.0.1:{timed_server.port}"
    schedule = Schedule.from_list([{"at": "0s", "until": "1s", "faults": {"error_rate": 1.0}}])

    async def go() -> list[int]:
        async with proxying(upstream, schedule) as (url, _proxy):
            statuses = []
            async with aiohttp.ClientSession() as session:
                for wait in (0.0, 1.2):
                    await asyncio.sleep(wait)
                    async with session.post(url + "/v1/chat/completions", data=orjson.dumps(CHAT)) as resp:
                        await resp.read()
                        statuses.append(resp.status)
            return statuses

    assert run_async(go()) == [503, 200]


def test_a_seed_fixes_every_fault_decision(timed_server) -> None:
    upstream = f"http://127.0.0.1:{timed_server.port}"
    body = {**CHAT, "stream": False, "max_tokens": 1}

    async def statuses(seed: int) -> list[int]:
        async with proxying(upstream, Schedule(Faults(error_rate=0.5)), seed=seed) as (url, _), aiohttp.ClientSession() as session:
            out = []
            for _ in range(16):
                async with session.post(url + "/v1/chat/completions", data=orjson.dumps(body)) as resp:
                    await resp.read()
                    out.append(resp.status)
            return out

    first, again, other = (run_async(statuses(s)) for s in (7, 7, 8))
    assert first == again
    assert set(first) == {200, 503} and first != other


def test_upstream_down_is_a_502(tmp_path) -> None:
    from surgelab.server.process import free_port

    async def go() -> int:
        async with (
            proxying(f"http://127.0.0.1:{free_port()}") as (url, proxy),
            aiohttp.ClientSession() as session,
            session.post(url + "/v1/chat/completions", data=orjson.dumps(CHAT)) as resp,
        ):
            assert proxy.stats.upstream_errors == 1
            return resp.status

    assert run_async(go()) == 502


def test_cli_rejects_bad_flags(cli) -> None:
    result = cli("proxy", "--upstream", "http://127.0.0.1:9", "--listen", "nowhere", timeout=30)
    assert result.returncode == 2 and "--listen 'nowhere'" in result.stderr
    result = cli("proxy", "--upstream", "http://127.0.0.1:9", "--drop", "3 apples", timeout=30)
    assert result.returncode == 2 and "flags.drop" in result.stderr and "Traceback" not in result.stderr
