"""What the client makes of every tool-call answer a server may give, from a raw socket.

Each case is the bytes of one HTTP answer to a request that offered tools; the request ends in
one recorded state — never a traceback — with the calls it carried (count, names, arguments
size, time to the first tool-call delta), or one protocol_error that says what was wrong.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import orjson
import pytest

from surgelab.aio import run_async
from surgelab.client.openai import OpenAIClient
from surgelab.metrics.record import Outcome, State
from surgelab.scenario.model import Target
from surgelab.tokenizer import BuiltinTokenizer
from surgelab.workload.request import RequestSpec, ToolResult

ARGS = ('{"query":', '"abc', ' def"}')  # 19 bytes together


def _stream(*events: dict, named: bool = False, done: bool = False) -> bytes:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    body = b"".join(
        (b"event: %s\n" % e["type"].encode() if named else b"") + b"data: %s\n\n" % orjson.dumps(e) for e in events
    )
    return head + body + (b"data: [DONE]\n\n" if done else b"")


def _json(body: dict) -> bytes:
    data = orjson.dumps(body)
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data)


def _chat(delta: dict, finish: str | None = None) -> dict:
    return {"id": "c1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


CHAT_OPEN = _chat({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                                        "function": {"name": "search", "arguments": ""}}]})  # fmt: skip
CHAT_ARGS = [_chat({"tool_calls": [{"index": 0, "function": {"arguments": a}}]}) for a in ARGS]
CHAT_SECOND = _chat({"tool_calls": [{"index": 1, "id": "call_2", "function": {"name": "fetch", "arguments": "{}"}}]})
CHAT_END = [_chat({}, "tool_calls"), {"id": "c1", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3}}]


def _responses(kind: str, **fields) -> dict:
    return {"type": kind, **fields}


R_CREATED = _responses("response.created", response={"id": "resp_1", "status": "in_progress", "output": []})
R_ITEM = _responses("response.output_item.added", output_index=0,
                    item={"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "search", "arguments": ""})  # fmt: skip
R_ARGS = [_responses("response.function_call_arguments.delta", item_id="fc_1", output_index=0, delta=a) for a in ARGS]
R_DONE = _responses("response.completed", response={"id": "resp_1", "status": "completed",
                                                     "usage": {"input_tokens": 9, "output_tokens": 3}})  # fmt: skip
M_START = {"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 9, "output_tokens": 1}}}
M_BLOCK = {
    "type": "content_block_start",
    "index": 0,
    "content_block": {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {}},
}
M_ARGS = [
    {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": a}} for a in ARGS
]
M_END = [{"type": "content_block_stop", "index": 0},
         {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}},
         {"type": "message_stop"}]  # fmt: skip
CALL = {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": "".join(ARGS)}}

# (name, kind, stream, answer, state, (calls, names, argument bytes) or a piece of the error)
CASES = [
    ("chat-stream", "chat", True, _stream(CHAT_OPEN, *CHAT_ARGS, *CHAT_END, done=True), State.OK, (1, "search", 19)),
    (
        "chat-two-calls",
        "chat",
        True,
        _stream(CHAT_OPEN, *CHAT_ARGS, CHAT_SECOND, *CHAT_END, done=True),
        State.OK,
        (2, "search,fetch", 21),
    ),
    (
        "chat-no-index",
        "chat",
        True,
        _stream(CHAT_OPEN, _chat({"tool_calls": [{"function": {"arguments": "{}"}}]}), *CHAT_END, done=True),
        State.OK,
        (1, "search", 2),
    ),  # a list's position stands in for a missing index, as OpenAI's SDK reads it
    (
        "chat-index-not-a-number",
        "chat",
        True,
        _stream(_chat({"tool_calls": [{"index": "0", "function": {"name": "search"}}]}), *CHAT_END, done=True),
        State.PROTOCOL_ERROR,
        "index '0' is not a whole number",
    ),
    (
        "chat-no-name",
        "chat",
        True,
        _stream(_chat({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}), done=True),
        State.PROTOCOL_ERROR,
        "call 0 starts without a function name",
    ),
    (
        "chat-arguments-not-a-string",
        "chat",
        True,
        _stream(
            CHAT_OPEN, _chat({"tool_calls": [{"index": 0, "function": {"arguments": {"q": 1}}}]}), *CHAT_END, done=True
        ),
        State.PROTOCOL_ERROR,
        "its arguments is dict, not a string",
    ),
    (
        "chat-tool-calls-not-a-list",
        "chat",
        True,
        _stream(_chat({"tool_calls": {"index": 0}}), done=True),
        State.PROTOCOL_ERROR,
        "tool_calls is dict, not a list",
    ),
    (
        "chat-arguments-not-json",
        "chat",
        True,
        _stream(CHAT_OPEN, *CHAT_ARGS[:2], *CHAT_END, done=True),
        State.PROTOCOL_ERROR,
        "tool call 0 (search): its arguments are not JSON",
    ),
    (
        "chat-whole",
        "chat",
        False,
        _json(
            {
                "id": "c1",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "tool_calls",
                        "message": {"role": "assistant", "content": None, "tool_calls": [CALL]},
                    }
                ],
                "usage": {"prompt_tokens": 9, "completion_tokens": 3},
            }
        ),
        State.OK,
        (1, "search", 19),
    ),
    (
        "responses-stream",
        "responses",
        True,
        _stream(R_CREATED, R_ITEM, *R_ARGS, R_DONE, named=True),
        State.OK,
        (1, "search", 19),
    ),
    (
        "responses-delta-before-item",
        "responses",
        True,
        _stream(R_CREATED, *R_ARGS, R_DONE, named=True),
        State.PROTOCOL_ERROR,
        "call 0 starts without a function name",
    ),
    (
        "responses-whole",
        "responses",
        False,
        _json(
            {
                "id": "resp_1",
                "status": "completed",
                "output": [
                    {"type": "function_call", "call_id": "call_1", "name": "search", "arguments": "".join(ARGS)}
                ],
                "usage": {"input_tokens": 9, "output_tokens": 3},
            }
        ),
        State.OK,
        (1, "search", 19),
    ),
    (
        "messages-stream",
        "messages",
        True,
        _stream(M_START, M_BLOCK, *M_ARGS, *M_END, named=True),
        State.OK,
        (1, "search", 19),
    ),
    (
        "messages-partial-json-not-a-string",
        "messages",
        True,
        _stream(
            M_START,
            M_BLOCK,
            {**M_ARGS[0], "delta": {"type": "input_json_delta", "partial_json": 7}},
            *M_END,
            named=True,
        ),
        State.PROTOCOL_ERROR,
        "its arguments is int, not a string",
    ),
    (
        "messages-whole",
        "messages",
        False,
        _json(
            {
                "id": "msg_1",
                "type": "message",
                "stop_reason": "tool_use",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"query": "abc def"}}],
                "usage": {"input_tokens": 9, "output_tokens": 3},
            }
        ),
        State.OK,
        (1, "search", 19),
    ),
]
SPEC = RequestSpec(prompt="hello there", prompt_tokens=2, max_tokens=3, tools=("search", "fetch"))


def _exchange(kind: str, stream: bool, reply: bytes, spec: RequestSpec = SPEC) -> tuple[Outcome, dict]:
    bodies = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(
            next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
        )
        bodies.append(orjson.loads(await reader.readexactly(length)))
        writer.write(reply)
        await writer.drain()
        writer.close()

    async def go() -> Outcome:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        target = Target(url=f"http://127.0.0.1:{port}/v1", model="m", stream=stream)
        out = Outcome()
        async with server, OpenAIClient(target, time.perf_counter_ns, BuiltinTokenizer(), api_key="k") as client:
            await asyncio.wait_for(client.send(replace(spec, kind=kind), out), 10)
        return out

    return run_async(go()), bodies[0]


@pytest.mark.parametrize(("name", "kind", "stream", "reply", "state", "expected"), CASES, ids=[c[0] for c in CASES])
def test_each_tool_call_answer_is_one_recorded_state(name, kind, stream, reply, state, expected):
    out, _ = _exchange(kind, stream, reply)
    assert out.state is state, out.error
    if state is State.OK:
        assert (out.tool_calls, out.tool_names, out.tool_args_bytes) == expected
        assert out.sent_ns < out.first_tool_ns <= out.end_ns
        assert [c.name for c in out.calls] == expected[1].split(",")
    else:
        assert expected in out.error and out.tool_calls is None


def test_an_answer_without_calls_records_none_made():
    reply = _stream(_chat({"content": " hi"}), *CHAT_END, done=True)
    out, body = _exchange("chat", True, reply)
    assert out.state is State.OK and (out.tool_calls, out.tool_names, out.tool_args_bytes, out.first_tool_ns) == (
        0,
        None,
        0,
        None,
    )
    assert [t["function"]["name"] for t in body["tools"]] == ["search", "fetch"]


@pytest.mark.parametrize("kind", ["chat", "responses", "messages"])
def test_the_results_go_back_in_each_apis_words(kind):
    """The request after a call carries the call and its result as the API expects them."""
    spec = replace(SPEC, tool_results=(ToolResult("call_1", "search", '{"query":"a"}', "found it"),))
    _, body = _exchange(kind, False, _json({}), spec)
    if kind == "chat":
        assert body["messages"][-2]["tool_calls"][0]["id"] == "call_1"
        assert body["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": "found it"}
    elif kind == "responses":
        assert body["input"][-2:] == [
            {"type": "function_call", "call_id": "call_1", "name": "search", "arguments": '{"query":"a"}'},
            {"type": "function_call_output", "call_id": "call_1", "output": "found it"},
        ]
    else:
        assert body["messages"][-2]["content"] == [
            {"type": "tool_use", "id": "call_1", "name": "search", "input": {"query": "a"}}
        ]
        assert body["messages"][-1]["content"] == [
            {"type": "tool_result", "tool_use_id": "call_1", "content": "found it"}
        ]
