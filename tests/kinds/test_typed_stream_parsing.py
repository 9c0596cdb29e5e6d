"""What the responses and messages kinds make of every answer a server may give, from a raw socket.

Each case is the bytes of one HTTP answer; the request ends in one recorded state — never a
traceback — with the tokens, usage and error the answer carried. The request's head is kept
too, to check how each API's key is sent.
"""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest

from surgelab.aio import run_async
from surgelab.client.openai import OpenAIClient
from surgelab.metrics.record import Outcome, State
from surgelab.scenario.model import Target
from surgelab.tokenizer import BuiltinTokenizer
from surgelab.workload.request import RequestSpec

TOK = BuiltinTokenizer()
KEY = "sk-test-0123456789"


def _sse(*events: dict, head: bytes = b"") -> bytes:
    body = b"".join(b"event: %s\ndata: %s\n\n" % (e["type"].encode(), orjson.dumps(e)) for e in events)
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n" + head + b"Connection: close\r\n\r\n" + body


def _json(body: dict | bytes, status: bytes = b"200 OK", head: bytes = b"") -> bytes:
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    return b"HTTP/1.1 %s\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s" % (
        status,
        head,
        len(data),
        data,
    )


def _delta(text: str) -> dict:
    return {
        "type": "response.output_text.delta",
        "item_id": "msg_1",
        "output_index": 0,
        "content_index": 0,
        "delta": text,
    }


CREATED = {"type": "response.created", "response": {"id": "resp_abc", "status": "in_progress", "output": []}}
TEXT = [_delta(" one"), _delta(" two"), _delta(" three")]
USAGE = {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8}
COMPLETED = {"type": "response.completed", "response": {"id": "resp_abc", "status": "completed", "usage": USAGE}}
BODY = {"id": "resp_abc", "object": "response", "status": "completed", "error": None, "usage": USAGE,
        "output": [{"type": "reasoning", "summary": []},
                   {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "one two three"}]}]}  # fmt: skip


def _block(text: str) -> dict:
    return {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}


START = {"type": "message_start", "message": {"id": "msg_abc", "type": "message", "role": "assistant", "content": [],
                                               "usage": {"input_tokens": 7, "output_tokens": 1}}}  # fmt: skip
OPEN = [
    START,
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "ping"},
]
BLOCKS = [_block(" one"), _block(" two"), _block(" three"), {"type": "content_block_stop", "index": 0}]
DELTA = {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 3}}
STOP = {"type": "message_stop"}
OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
CACHED = {**START, "message": {**START["message"], "usage": {"input_tokens": 2, "cache_read_input_tokens": 5,
                                                              "cache_creation_input_tokens": 1}}}  # fmt: skip
MESSAGE = {"id": "msg_abc", "type": "message", "role": "assistant", "stop_reason": "end_turn",
           "content": [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "one two three"}],
           "usage": {"input_tokens": 7, "output_tokens": 3}}  # fmt: skip
LIMITS = (b"anthropic-ratelimit-requests-remaining: 41\r\nanthropic-ratelimit-tokens-remaining: 9000\r\n"
          b"anthropic-ratelimit-requests-reset: 2099-01-01T00:00:00Z\r\n")  # fmt: skip

# (name, kind, stream, the answer, state, (output tokens, prompt tokens, usage source) or a piece of the error)
CASES = [
    ("responses-stream", "responses", True, _sse(CREATED, *TEXT, COMPLETED), State.OK, (3, 5, "server")),
    ("responses-incomplete", "responses", True, _sse(CREATED, *TEXT, {**COMPLETED, "type": "response.incomplete"}),
     State.OK, (3, 5, "server")),
    ("responses-reasoning", "responses", True,
     _sse(CREATED, {"type": "response.reasoning_text.delta", "delta": " hm"}, *TEXT, COMPLETED), State.OK, (3, 5, "server")),
    ("responses-error-event", "responses", True,
     _sse(CREATED, TEXT[0], {"type": "error", "code": "server_error", "message": "boom", "sequence_number": 3}),
     State.PROTOCOL_ERROR, "error in stream: server_error: boom"),
    ("responses-failed", "responses", True, _sse(CREATED, {"type": "response.failed", "response": {
        "id": "resp_abc", "status": "failed", "error": {"code": "rate_limit_exceeded", "message": "slow down"}}}),
     State.PROTOCOL_ERROR, "response failed: rate_limit_exceeded: slow down"),
    ("responses-cut-short", "responses", True, _sse(CREATED, *TEXT), State.PROTOCOL_ERROR,
     "stream ended before response.completed"),
    ("responses-event-not-json", "responses", True, _sse(CREATED)[:-2] + b"data: {nope\n\n", State.PROTOCOL_ERROR,
     "invalid stream event"),
    ("responses-usage-not-a-number", "responses", True,
     _sse(CREATED, *TEXT, {**COMPLETED, "response": {"usage": {"output_tokens": "many"}}}), State.PROTOCOL_ERROR, "usage"),
    ("responses-whole", "responses", False, _json(BODY), State.OK, (3, 5, "server")),
    ("responses-whole-error", "responses", False, _json({**BODY, "status": "failed", "output": [],
                                                         "error": {"code": "server_error", "message": "bad"}}),
     State.PROTOCOL_ERROR, "server_error: bad"),
    ("responses-http-400", "responses", False, _json({"error": {"message": "Previous response with id 'x' not found.",
                                                                "code": "previous_response_not_found"}}, b"400 Bad Request"),
     State.HTTP_ERROR, "Previous response with id 'x' not found."),
    ("messages-stream", "messages", True, _sse(*OPEN, *BLOCKS, DELTA, STOP), State.OK, (3, 7, "server")),
    ("messages-cache-counts", "messages", True, _sse(CACHED, *BLOCKS, DELTA, STOP), State.OK, (3, 8, "server")),
    ("messages-no-delta", "messages", True, _sse(*OPEN, *BLOCKS, STOP), State.OK, (3, None, "counted")),
    ("messages-overloaded-event", "messages", True, _sse(*OPEN, BLOCKS[0], OVERLOADED), State.PROTOCOL_ERROR,
     "error in stream: overloaded_error: Overloaded"),
    ("messages-cut-short", "messages", True, _sse(*OPEN, *BLOCKS, DELTA), State.PROTOCOL_ERROR,
     "stream ended before message_stop"),
    ("messages-delta-not-an-object", "messages", True, _sse(*OPEN, {"type": "content_block_delta", "delta": [1]}, STOP),
     State.PROTOCOL_ERROR, "invalid stream event"),
    ("messages-whole", "messages", False, _json(MESSAGE), State.OK, (3, 7, "server")),
    ("messages-whole-error", "messages", False, _json(OVERLOADED), State.PROTOCOL_ERROR, "overloaded_error: Overloaded"),
    ("messages-http-529", "messages", False, _json(OVERLOADED, b"529 Overloaded", LIMITS), State.HTTP_ERROR,
     "HTTP 529: {\"type\":\"error\""),
]  # fmt: skip


def _exchange(kind: str, stream: bool, reply: bytes) -> tuple[Outcome, bytes]:
    """One request of ``kind`` to a socket that answers ``reply``; the outcome and the request's head."""
    heads: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(reply)
        await writer.drain()
        writer.close()

    async def go() -> Outcome:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        out = Outcome()
        target = Target(url=f"http://127.0.0.1:{port}/v1", model="m", stream=stream)
        spec = RequestSpec(prompt="hello there", prompt_tokens=2, max_tokens=3, kind=kind)
        try:
            async with OpenAIClient(target, time.perf_counter_ns, TOK, api_key=KEY) as client:
                await client.send(spec, out)
        finally:
            server.close()
            await server.wait_closed()
        return out

    return run_async(go()), heads[0]


@pytest.mark.parametrize(
    ("kind", "stream", "reply", "state", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_each_answer_is_one_recorded_state(kind, stream, reply, state, expected):
    out, _ = _exchange(kind, stream, reply)
    assert out.state is state, out.error
    assert out.end_ns is not None and out.kind == kind
    if state is not State.OK:
        assert expected in out.error
        return
    output, prompt, source = expected
    assert (out.output_tokens, out.usage_source) == (output, source)
    assert out.prompt_tokens == (prompt if prompt is not None else 2), "no usage: the prompt as we counted it"
    assert out.response_id in ("resp_abc", "msg_abc")
    if stream:
        assert len(out.token_ns) == 3 + (kind == "responses" and b"reasoning" in reply), "one per text delta"
        assert out.first_token_ns == out.token_ns[0]


def test_messages_send_the_key_as_anthropic_does():
    _, head = _exchange("messages", True, CASES[11][3])
    lines = head.decode().lower().split("\r\n")
    assert lines[0].startswith("post /v1/messages ")
    assert f"x-api-key: {KEY}" in lines and "anthropic-version: 2023-06-01" in lines
    assert not any(line.startswith("authorization:") for line in lines), "the key goes once, not also as a Bearer"


def test_responses_send_a_bearer_key():
    _, head = _exchange("responses", True, CASES[0][3])
    lines = head.decode().lower().split("\r\n")
    assert lines[0].startswith("post /v1/responses ") and f"authorization: bearer {KEY}" in lines
    assert not any(line.startswith("x-api-key:") for line in lines)


def test_anthropic_rate_limit_headers_are_recorded():
    out, _ = _exchange("messages", False, CASES[-1][3])
    assert out.state is State.HTTP_ERROR and out.http_status == 529
    assert (out.ratelimit_requests, out.ratelimit_tokens) == (41, 9000)
    assert out.ratelimit_reset_s > 0
