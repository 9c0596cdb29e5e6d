"""The OpenAI client against the scripted server: every way a request can end is classified."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import time

import pytest

from surgelab.aio import run_async
from surgelab.client.openai import OpenAIClient
from surgelab.metrics.record import Outcome, State
from surgelab.scenario.model import Target
from surgelab.tokenizer import BuiltinTokenizer
from surgelab.workload.request import RequestSpec

TOK = BuiltinTokenizer()
PROMPT = "hello there general kenobi"  # "general" is two pieces of at most six letters
SPEC = RequestSpec(prompt=PROMPT, prompt_tokens=TOK.count(PROMPT), max_tokens=8)


def _clock() -> int:
    return time.perf_counter_ns()


def _send(url: str, model: str, spec: RequestSpec = SPEC, **target) -> Outcome:
    async def go() -> Outcome:
        out = Outcome()
        async with OpenAIClient(Target(url=url, model=model, **target), _clock, TOK) as client:
            await client.send(spec, out)
        return out

    return run_async(go())


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ok_stream_has_every_timestamp_and_server_usage(zero_server):
    out = _send(zero_server.url, "ok")
    assert out.state is State.OK, out.error
    assert out.http_status == 200
    assert out.sent_ns <= out.first_byte_ns <= out.first_token_ns <= out.end_ns
    assert len(out.token_ns) == 8 and list(out.token_ns) == sorted(out.token_ns)
    assert out.token_ns[0] == out.first_token_ns
    assert out.output_tokens == 8 and out.usage_source == "server"
    assert out.prompt_tokens == SPEC.prompt_tokens == 5  # the server's count, which agrees with ours
    assert out.error is None


def test_timing_of_one_streamed_request(timed_server):
    out = _send(timed_server.url, "ok")
    assert out.state is State.OK
    ttft = (out.first_token_ns - out.sent_ns) / 1e6
    assert 200 <= ttft < 250  # one sample on a possibly busy machine; test_run_open_loop checks the P50
    gaps = [(b - a) / 1e6 for a, b in zip(out.token_ns, out.token_ns[1:])]
    assert sorted(gaps)[len(gaps) // 2] == pytest.approx(20, abs=2)


@pytest.mark.parametrize("status", [500, 503, 429, 400])
def test_http_error(zero_server, status):
    out = _send(zero_server.url, f"status-{status}")
    assert out.state is State.HTTP_ERROR
    assert out.http_status == status
    assert out.error.startswith(f"HTTP {status}: ") and f"scripted {status}" in out.error
    assert out.first_token_ns is None and out.end_ns is not None


def test_stall_times_out_at_first_token(zero_server):
    started = time.monotonic()
    out = _send(zero_server.url, "stall", timeouts={"first_token": "300ms"})
    assert out.state is State.TIMEOUT
    assert out.error == "first token timeout after 0.3s"
    assert 0.29 <= (out.end_ns - out.sent_ns) / 1e9 < 0.6
    assert time.monotonic() - started < 2


def test_slow_stream_times_out_in_total(zero_server):
    out = _send(zero_server.url, "slow-0.2", timeouts={"first_token": "1s", "total": "500ms"})
    assert out.state is State.TIMEOUT
    assert out.error.startswith("total timeout after 0.5s")
    assert out.first_token_ns is not None and len(out.token_ns) >= 2
    assert 0.49 <= (out.end_ns - out.sent_ns) / 1e9 < 0.8


def test_first_token_bound_does_not_cut_a_stream_that_started(timed_server):
    """Once the first token is in, only the total timeout applies (here 8 tokens take 340 ms)."""
    out = _send(timed_server.url, "ok", timeouts={"first_token": "250ms", "total": "5s"})
    assert out.state is State.OK, out.error


def test_reset_is_a_connection_error(zero_server):
    out = _send(zero_server.url, "reset")
    assert out.state is State.CONNECTION_ERROR, out.error
    assert out.error


def test_garbage_event_is_a_protocol_error(zero_server):
    out = _send(zero_server.url, "garbage")
    assert out.state is State.PROTOCOL_ERROR
    assert out.error.startswith("invalid stream event")


def test_stream_without_done_is_a_protocol_error(zero_server):
    out = _send(zero_server.url, "no-done")
    assert out.state is State.PROTOCOL_ERROR
    assert "before [DONE]" in out.error


def test_no_usage_counts_the_output_itself(zero_server):
    out = _send(zero_server.url, "no-usage", RequestSpec(prompt="a b c", prompt_tokens=3, max_tokens=13))
    assert out.state is State.OK
    assert out.usage_source == "counted"
    assert out.output_tokens == 13
    assert out.prompt_tokens == 3


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_non_streaming_uses_server_usage(zero_server, endpoint):
    out = _send(zero_server.url, "ok", endpoint=endpoint, stream=False)
    assert out.state is State.OK, out.error
    assert out.usage_source == "server" and out.output_tokens == 8
    assert out.first_token_ns == out.end_ns and len(out.token_ns) == 0


def test_completions_endpoint_streams(zero_server):
    out = _send(zero_server.url, "ok", endpoint="completions")
    assert out.state is State.OK, out.error
    assert len(out.token_ns) == 8 and out.output_tokens == 8


def test_connection_refused():
    out = _send(f"http://127.0.0.1:{_closed_port()}/v1", "ok")
    assert out.state is State.CONNECTION_ERROR
    assert out.sent_ns is not None and out.first_byte_ns is None and out.http_status is None


def test_cancellation_propagates(timed_server):
    """Only the run stopping escapes send(); the runner turns it into `cancelled`."""

    async def go() -> Outcome:
        out = Outcome()
        async with OpenAIClient(Target(url=timed_server.url, model="stall"), _clock, TOK) as client:
            task = asyncio.create_task(client.send(SPEC, out))
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        return out

    out = run_async(go())
    assert out.end_ns is None and out.first_byte_ns is None


def test_body_asks_for_usage_and_exact_lengths():
    spec = RequestSpec(prompt="p", prompt_tokens=1, max_tokens=5, system_prompt="sys")
    chat = OpenAIClient(Target(url="http://127.0.0.1:1/v1", model="m", extra_body={"temperature": 0}), _clock, TOK)
    body = chat.body(spec)
    assert body["messages"] == [{"role": "system", "content": "sys"}, {"role": "user", "content": "p"}]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == body["min_tokens"] == 5 and body["ignore_eos"] is True
    assert body["temperature"] == 0
    plain = OpenAIClient(
        Target(url="http://127.0.0.1:1/v1", model="m", endpoint="completions", stream=False, force_output_tokens=False),
        _clock,
        TOK,
    )
    body = plain.body(spec)
    assert body["prompt"] == "sys p" and "stream" not in body and "ignore_eos" not in body and "min_tokens" not in body


def _sse(*events: bytes) -> bytes:
    body = b"".join(b"data: " + e + b"\n\n" for e in events)
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n" + body


def _json(body: bytes) -> bytes:
    head = (
        f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


_CHUNK = b'{"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": null}]}'
RAW_CASES = [
    ("not-http", b"NOT HTTP AT ALL\r\n\r\n", True, State.PROTOCOL_ERROR),
    ("closed-at-once", b"", True, State.CONNECTION_ERROR),
    ("usage-not-a-mapping", _sse(_CHUNK, b'{"choices": [], "usage": [1, 2]}', b"[DONE]"), True, State.PROTOCOL_ERROR),
    ("usage-not-a-number", _sse(_CHUNK, b'{"choices": [], "usage": {"completion_tokens": "many"}}', b"[DONE]"), True,
     State.PROTOCOL_ERROR),
    ("content-not-text", _sse(b'{"choices": [{"delta": {"content": 5}, "finish_reason": "stop"}]}', b"[DONE]"), True,
     State.PROTOCOL_ERROR),
    ("event-not-an-object", _sse(b"[1, 2]", b"[DONE]"), True, State.PROTOCOL_ERROR),
    ("stream-in-error", _sse(b'{"error": {"message": "overloaded"}}'), True, State.PROTOCOL_ERROR),
    ("bare-done", _sse(_CHUNK, b"[DONE]"), True, State.OK),
    ("body-not-json", _json(b"{nope"), False, State.PROTOCOL_ERROR),
    ("body-no-choices", _json(b'{"choices": []}'), False, State.PROTOCOL_ERROR),
    ("body-error", _json(b'{"error": {"message": "bad"}}'), False, State.PROTOCOL_ERROR),
    ("body-ok-no-usage", _json(b'{"choices": [{"message": {"content": "one two three"}}]}'), False, State.OK),
]  # fmt: skip


@pytest.mark.parametrize(("reply", "stream", "state"), [c[1:] for c in RAW_CASES], ids=[c[0] for c in RAW_CASES])
def test_malformed_responses_from_a_raw_socket(reply, stream, state):
    """Whatever bytes come back, send() returns a state and never raises."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(reply)
        await writer.drain()
        writer.close()

    async def go() -> Outcome:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        out = Outcome()
        target = Target(url=f"http://127.0.0.1:{port}/v1", model="m", stream=stream)
        try:
            async with OpenAIClient(target, _clock, TOK) as client:
                await client.send(SPEC, out)
        finally:
            server.close()
            await server.wait_closed()
        return out

    out = run_async(go())
    assert out.state is state, out.error
    assert out.end_ns is not None
    if state is State.OK:
        assert out.usage_source == "counted" and out.output_tokens in (1, 3)
    else:
        assert out.error


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="relies on Linux dropping SYNs past a full backlog")
def test_connect_timeout():
    """A listener that never accepts, with its backlog full, leaves the next connect hanging."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = []
        try:
            for _ in range(3):
                filler = socket.socket()
                filler.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    filler.connect(("127.0.0.1", port))
                fillers.append(filler)
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                pytest.skip("this kernel completes connections past the backlog")
            except OSError:
                pass
            out = _send(f"http://127.0.0.1:{port}/v1", "ok", timeouts={"connect": "300ms", "first_token": "5s"})
        finally:
            for filler in fillers:
                filler.close()
    assert out.state is State.TIMEOUT
    assert out.error.startswith("connect timeout after 0.3s")
    assert 0.29 <= (out.end_ns - out.sent_ns) / 1e9 < 1.0
