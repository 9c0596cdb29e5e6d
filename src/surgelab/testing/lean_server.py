"""A streaming OpenAI-style server with as little of its own cost and clock error as Python allows.

No web framework between the socket and the clock: an asyncio protocol with the httptools
parser stamps a request's arrival when its first bytes are read from the socket, and stamps
every token chunk just before it is handed to the socket. Two uses:

* **truth for timing fidelity** (``benchmarks/peers_fidelity.py``): the first token is due
  ``ttft`` after arrival and token ``k`` at ``ttft + k * itl``, on absolute deadlines; the
  loop's timers are millisecond-grained, so the stamps, not the nominal figures, are the
  truth. ``GET /truth`` returns, per finished streamed request, the server's TTFT (first
  token chunk − arrival), mean gap between token chunks and E2E (last token chunk − arrival)
  in milliseconds. (The scripted aiohttp server spends about a millisecond of its own between
  arrival and its handler's clock, which every client's TTFT includes and no handler sees.)
* **a zero-delay server for a client's ceiling** (``surgelab calibrate``): with ``ttft`` and
  ``itl`` at 0 every answer is one pre-built write, about a fifth of the scripted server's
  CPU a request, so the client rather than the server is what the search finds.

    python -m surgelab.testing.lean_server --port 0 --ttft 0.2 --itl 0.02   # prints "listening on URL"
"""

from __future__ import annotations

import asyncio
import functools
import time

import httptools
import orjson

from surgelab.testing.serving import run_timed_server
from surgelab.tokenizer import VOCABULARY, BuiltinTokenizer

_TOKENIZER = BuiltinTokenizer()
_STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)


def _event(chat: bool, text: str | None, finish: str | None = None, usage: dict | None = None) -> bytes:
    if usage is not None:
        choices: list = []
    elif chat:
        choices = [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]
    else:
        choices = [{"index": 0, "text": text, "finish_reason": finish}]
    body: dict = {"id": "truth", "object": "chat.completion.chunk" if chat else "text_completion", "created": 0,
                  "model": "ok", "choices": choices}  # fmt: skip
    if usage is not None:
        body["usage"] = usage
    data = b"data: " + orjson.dumps(body) + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


def _json(status: int, value: object) -> bytes:
    body = orjson.dumps(value)
    return b"HTTP/1.1 %d OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        status,
        len(body),
        body,
    )


class Truth:
    """What the server did, per finished streamed request."""

    def __init__(self) -> None:
        self.ttft_ms: list[float] = []
        self.itl_ms: list[float] = []
        self.e2e_ms: list[float] = []

    def add(self, arrived: int, tokens: list[int]) -> None:
        self.ttft_ms.append((tokens[0] - arrived) / 1e6)
        self.itl_ms.append((tokens[-1] - tokens[0]) / (len(tokens) - 1) / 1e6 if len(tokens) > 1 else 0.0)
        self.e2e_ms.append((tokens[-1] - arrived) / 1e6)


class _Connection(asyncio.Protocol):
    def __init__(self, ttft_ns: int, itl_ns: int, truth: Truth) -> None:
        self.ttft_ns, self.itl_ns, self.truth = ttft_ns, itl_ns, truth
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.arrived: int | None = None
        self.url = b""
        self.body = bytearray()
        self.method = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.arrived is None:
            self.arrived = time.perf_counter_ns()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.transport.close() if self.transport else None

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        arrived, url, body = self.arrived or time.perf_counter_ns(), self.url, bytes(self.body)
        self.arrived, self.url, self.body = None, b"", bytearray()
        method = self.parser.get_method()
        asyncio.get_running_loop().create_task(self.answer(method, url.split(b"?")[0], body, arrived))

    async def answer(self, method: bytes, path: bytes, body: bytes, arrived: int) -> None:
        write = self.transport.write  # type: ignore[union-attr]
        if method == b"GET":
            if path == b"/truth":
                t = self.truth
                write(_json(200, {"ttft_ms": t.ttft_ms, "itl_ms": t.itl_ms, "e2e_ms": t.e2e_ms}))
            elif path.endswith(b"/models"):
                write(_json(200, {"object": "list", "data": [{"id": "ok", "object": "model"}]}))
            else:
                write(_json(200 if path == b"/health" else 404, {"status": "ok"}))
            return
        request = orjson.loads(body or b"{}")
        chat = path.endswith(b"/chat/completions")
        n = int(request.get("max_tokens") or request.get("max_completion_tokens") or 16)
        words = [" " + VOCABULARY[i % len(VOCABULARY)] for i in range(n)]
        prompt = request.get("messages", [{}])[-1].get("content", "") if chat else request.get("prompt", "")
        prompt_tokens = _TOKENIZER.count(prompt if isinstance(prompt, str) else "")
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": n, "total_tokens": prompt_tokens + n}
        if not self.ttft_ns and not self.itl_ns and request.get("stream"):  # zero delay: one write, no stamps
            write(_instant_stream(chat, n, bool((request.get("stream_options") or {}).get("include_usage")),
                                  prompt_tokens))  # fmt: skip
            return
        if not request.get("stream"):
            await _sleep_until(arrived + self.ttft_ns + self.itl_ns * (n - 1))
            text = "".join(words)
            choice = {"index": 0, "finish_reason": "length",
                      **({"message": {"role": "assistant", "content": text}} if chat else {"text": text})}  # fmt: skip
            write(_json(200, {"id": "truth", "object": "chat.completion" if chat else "text_completion",
                              "model": "ok", "choices": [choice], "usage": usage}))  # fmt: skip
            return
        write(_STREAM_HEAD)
        stamps = []
        for k, word in enumerate(words):
            chunk = _event(chat, word, "length" if k == n - 1 else None)
            await _sleep_until(arrived + self.ttft_ns + self.itl_ns * k)
            stamps.append(time.perf_counter_ns())
            write(chunk)
        if (request.get("stream_options") or {}).get("include_usage"):
            write(_event(chat, None, usage=usage))
        data = b"data: [DONE]\n\n"
        write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))
        self.truth.add(arrived, stamps)


@functools.lru_cache(maxsize=64)
def _instant_stream(chat: bool, n: int, usage: bool, prompt_tokens: int) -> bytes:
    """A whole streamed answer as one chunked response, built once per shape."""
    words = [" " + VOCABULARY[i % len(VOCABULARY)] for i in range(n)]
    events = [_event(chat, word, "length" if k == n - 1 else None) for k, word in enumerate(words)]
    if usage:
        counts = {"prompt_tokens": prompt_tokens, "completion_tokens": n, "total_tokens": prompt_tokens + n}
        events.append(_event(chat, None, usage=counts))
    done = b"data: [DONE]\n\n"
    return _STREAM_HEAD + b"".join(events) + b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done)


async def _sleep_until(at_ns: int) -> None:
    """Never less than asked (uvloop's millisecond timers can wake up to a millisecond early)."""
    while (delay := at_ns - time.perf_counter_ns()) > 0:
        await asyncio.sleep(delay / 1e9)


async def serve(host: str, port: int, ttft: float, itl: float) -> None:
    truth = Truth()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: _Connection(int(ttft * 1e9), int(itl * 1e9), truth), host, port, backlog=4096
    )
    print(f"listening on http://{host}:{server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    run_timed_server(__doc__, serve, argv)


if __name__ == "__main__":
    main()
