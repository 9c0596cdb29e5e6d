"""The scripted completion every interop server answers, for the Python stacks (one copy).

Every stack in the matrix serves the same thing, so a difference in what surgelab measures
can only come from the stack's HTTP/1.1 handling: ``POST /v1/chat/completions`` streams
``--tokens`` chunks (``choices[0].delta.content``), the first ``--ttft`` seconds after the
request arrived and then one every ``--itl`` seconds, on absolute deadlines so a late wake-up
never shifts the tokens after it; then a usage chunk when ``stream_options.include_usage``,
then ``data: [DONE]``. ``POST /v1/responses`` and ``POST /v1/messages`` stream the same tokens in
the Responses API's and the Messages API's named events (an ``event:`` line before each
``data:``): an opening event with the first token, one text delta per token, and the closing
events with the usage after the last. With ``"stream": false`` the whole answer (a chat
completion, whatever the path) leaves at the last token's deadline as one JSON body. ``GET /stats`` counts completion requests, the connections they
came over and the most requests one connection carried, so a test can see that the server
really closed (or kept) connections. ``GET /health`` answers ``ok``.

The Go, Node.js and C++ servers write the same bytes in their own language; this module is
standalone (standard library only), so a server never depends on the client it tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator

__all__ = ["Script", "Connections", "options", "until", "COMPLETIONS", "PATHS"]

COMPLETIONS = "/v1/chat/completions"
RESPONSES, MESSAGES = "/v1/responses", "/v1/messages"
PATHS = (COMPLETIONS, RESPONSES, MESSAGES)
DONE = b"data: [DONE]\n\n"
_SPIN_S = 0.0015  # the last stretch before a deadline, passed yielding to the loop rather than on a timer


def options(doc: str) -> argparse.ArgumentParser:
    """The command line every interop server shares; 0 for ``--idle-timeout``/``--max-requests`` keeps the stack's default."""
    parser = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ttft", type=float, default=0.05, help="seconds from arrival to the first token")
    parser.add_argument("--itl", type=float, default=0.01, help="seconds between tokens")
    parser.add_argument("--tokens", type=int, default=8, help="tokens in every answer")
    parser.add_argument("--idle-timeout", type=float, default=0.0, help="close a connection idle this long")
    parser.add_argument("--max-requests", type=int, default=0, help="requests per connection")
    return parser


class Script:
    """The bytes of one answer and when each part is due."""

    def __init__(self, ttft: float, itl: float, tokens: int) -> None:
        self.ttft, self.itl, self.tokens = ttft, itl, tokens
        self.usage = {"prompt_tokens": 0, "completion_tokens": tokens, "total_tokens": tokens}

    @staticmethod
    def asks(body: bytes) -> tuple[bool, bool]:
        """(stream, include_usage) from a request body."""
        request = json.loads(body or b"{}")
        return bool(request.get("stream")), bool((request.get("stream_options") or {}).get("include_usage"))

    def due(self, arrived: float, k: int) -> float:
        """When token ``k`` (0-based) leaves, on the ``time.monotonic`` clock."""
        return arrived + self.ttft + k * self.itl

    def chunk(self, k: int) -> bytes:
        choice = {
            "index": 0,
            "delta": {"content": f" t{k}"},
            "finish_reason": "length" if k == self.tokens - 1 else None,
        }
        return self._event({"choices": [choice]})

    def named(self, path: str, k: int) -> bytes:
        """Token ``k`` in the named events of the Responses or the Messages API (the opening event before the first)."""
        if path == RESPONSES:
            opening = _named("response.created", {"response": {"id": "interop", "status": "in_progress"}})
            delta = _named("response.output_text.delta", {"delta": f" t{k}"})
        else:
            opening = _named("message_start", {"message": {"id": "interop", "usage": {"input_tokens": 0, "output_tokens": 1}}})
            delta = _named("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": f" t{k}"}})
        return (opening if k == 0 else b"") + delta

    def named_tail(self, path: str) -> bytes:
        """The closing events, with the usage: ``response.completed``, or ``message_delta`` and ``message_stop``."""
        if path == RESPONSES:
            usage = {"input_tokens": 0, "output_tokens": self.tokens}
            return _named("response.completed", {"response": {"id": "interop", "status": "completed", "usage": usage}})
        delta = _named("message_delta", {"delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": self.tokens}})
        return delta + _named("message_stop", {})

    def usage_chunk(self) -> bytes:
        return self._event({"choices": [], "usage": self.usage})

    def whole(self) -> bytes:
        text = "".join(f" t{k}" for k in range(self.tokens))
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
        body = {"id": "interop", "object": "chat.completion", "created": 0, "model": "interop", "choices": [choice],
                "usage": self.usage}  # fmt: skip
        return json.dumps(body).encode()

    def _event(self, fields: dict) -> bytes:
        body = {"id": "interop", "object": "chat.completion.chunk", "created": 0, "model": "interop", **fields}
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    def stream(self, arrived: float, usage: bool, path: str = COMPLETIONS) -> Iterator[tuple[float, bytes]]:
        """(deadline, bytes) for every write of a streamed answer to ``path``, in order."""
        chat = path == COMPLETIONS
        for k in range(self.tokens):
            yield self.due(arrived, k), self.chunk(k) if chat else self.named(path, k)
        last = self.due(arrived, self.tokens - 1)
        yield last, ((self.usage_chunk() if usage else b"") + DONE) if chat else self.named_tail(path)

    async def astream(self, arrived: float, usage: bool, path: str = COMPLETIONS) -> AsyncIterator[bytes]:
        """The streamed answer, each write awaited until its deadline."""
        for deadline, data in self.stream(arrived, usage, path):
            await until(deadline)
            yield data

    def blocking_stream(self, arrived: float, usage: bool, path: str = COMPLETIONS) -> Iterator[bytes]:
        """The streamed answer for a thread per connection (``time.sleep``)."""
        for deadline, data in self.stream(arrived, usage, path):
            while (delay := deadline - time.monotonic()) > 0:
                time.sleep(delay)
            yield data


def _named(name: str, fields: dict) -> bytes:
    return f"event: {name}\ndata: ".encode() + json.dumps({"type": name, **fields}, separators=(",", ":")).encode() + b"\n\n"


async def until(deadline: float) -> None:
    """Sleep until ``deadline`` (``time.monotonic``), never less and at most a few microseconds
    more: event loop timers wake up to a millisecond early or late (epoll and libuv count whole
    milliseconds), so the timer stops short and the last stretch yields to the loop until the
    deadline has passed. The script's timing is then the stack's, not the timer's."""
    while (delay := deadline - time.monotonic()) > _SPIN_S:
        await asyncio.sleep(delay - _SPIN_S)
    while time.monotonic() < deadline:
        await asyncio.sleep(0)


class Connections:
    """Completion requests per connection; a connection is whatever key the stack can name
    (the client's port, a transport, nginx's ``$connection`` serial)."""

    def __init__(self) -> None:
        self.per: dict[object, int] = {}

    def seen(self, key: object) -> None:
        self.per[key] = self.per.get(key, 0) + 1

    def report(self) -> bytes:
        counts = self.per.values()
        return json.dumps(
            {"requests": sum(counts), "connections": len(self.per), "most": max(counts, default=0)}
        ).encode()
