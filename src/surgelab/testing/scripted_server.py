"""A streaming OpenAI-style server whose timing and failures are scripted exactly.

The first token leaves ``ttft`` seconds after the request arrives and each further token
``itl`` seconds after the previous one, on absolute deadlines so delays never accumulate.
With ``ttft = itl = 0`` it is the zero-delay server that measures a client's own ceiling.

The requested ``model`` name picks a behaviour, so one server process serves every case:

    ok (any other name)  stream max_tokens tokens        status-NNN   answer HTTP NNN
    stall                accept, never send a byte       reset        cut the connection mid-stream
    garbage              send invalid JSON in the stream no-done      close the stream without [DONE]
    no-usage             stream without a usage chunk    slow-N       N seconds between tokens
    echo-auth            HTTP 401 repeating the Authorization header back
    drop-reused          close a connection, without a word, when a second request arrives on it
                         (a keep-alive timer or request limit firing while the request was on its way)
    quota-N              a hosted API's quota of N requests a second: OpenAI's x-ratelimit-* headers
                         on every answer, then HTTP 429 with Retry-After until the second is over

``/moved/v1/...`` answers 307 and ``/moved-301/v1/...`` 301 to the same path without the
prefix (a redirect to follow), ``/moved-away/v1/...`` 307 to it on ``localhost`` (another origin); ``--cert``/``--key`` serve HTTPS, ``--client-ca`` asks every
client for a certificate that CA signed (mutual TLS).

Run it with ``python -m surgelab.testing.scripted_server --port 0``; it prints
``listening on http://127.0.0.1:PORT`` once it accepts connections. ``GET /stats`` tells how
many completion requests arrived over how many distinct TCP connections, so
tests can tell pooled keep-alive from a new connection per request, and the last
``Authorization`` header, so tests can check that a key reached the server, and every
``X-Session-ID`` header in arrival order (``session_ids``, the first 10,000).
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import orjson
from aiohttp import web

from surgelab.testing.serving import (
    add_tls_arguments,
    run_until_interrupted,
    serve_app,
    server_argument_parser,
    tls_context,
)
from surgelab.tokenizer import VOCABULARY, BuiltinTokenizer

__all__ = ["make_app", "serve", "QUOTA_TOKENS"]

QUOTA_TOKENS = 100_000  # a quota-N model's tokens a second

_TOKENIZER = BuiltinTokenizer()


def _chunk(chat: bool, model: str, text: str | None, finish: str | None = None, usage: dict | None = None) -> bytes:
    if usage is not None:
        choices: list = []
    elif chat:
        choices = [{"index": 0, "delta": {"content": text} if text is not None else {}, "finish_reason": finish}]
    else:
        choices = [{"index": 0, "text": text or "", "finish_reason": finish}]
    body: dict[str, Any] = {"id": "cmpl-scripted", "object": "chat.completion.chunk" if chat else "text_completion",
            "created": int(time.time()), "model": model, "choices": choices}  # fmt: skip
    if usage is not None:
        body["usage"] = usage
    return b"data: " + orjson.dumps(body) + b"\n\n"


def _prompt_tokens(body: dict, chat: bool) -> int:
    if chat:
        return sum(
            _TOKENIZER.count(m.get("content") or "")
            for m in body.get("messages", [])
            if isinstance(m.get("content"), str)
        )
    return _TOKENIZER.count(str(body.get("prompt", "")))


async def _until(deadline: float) -> None:
    """Sleep until ``deadline`` (``time.monotonic``), never less: uvloop's millisecond timers can wake
    up to a millisecond early, and a scripted delay must not be shorter than the script says."""
    while (delay := deadline - time.monotonic()) > 0:
        await asyncio.sleep(delay)


def make_app(ttft: float, itl: float) -> web.Application:
    live: dict[int, asyncio.BaseTransport] = {}  # held, so no id is reused while it is listed
    stats: dict = {"requests": 0, "connections": 0, "authorization": None, "session_ids": []}
    quotas: dict[str, list[float]] = {}  # model -> [window start, requests, tokens] (quota-N)

    async def completions(request: web.Request) -> web.StreamResponse:
        arrived = time.monotonic()
        transport = request.transport
        stats["requests"] += 1
        reused = transport is not None and id(transport) in live
        if transport is not None and not reused:  # not the client port: loopback reuses those
            if len(live) > 1000:
                for key in [k for k, t in live.items() if t.is_closing()]:
                    del live[key]
            live[id(transport)] = transport
            stats["connections"] += 1
        stats["authorization"] = request.headers.get("Authorization")
        session = request.headers.get("X-Session-ID")
        if session is not None and len(stats["session_ids"]) < 10_000:  # what a router pinning sessions reads
            stats["session_ids"].append(session)
        chat = request.path.endswith("/chat/completions")
        body = orjson.loads(await request.read())
        model = str(body.get("model", "ok"))
        if model == "drop-reused" and reused:
            transport.close()  # type: ignore[union-attr]
            raise asyncio.CancelledError  # aiohttp writes nothing for a handler cancelled on a closed connection
        n = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        gap = float(model[5:]) if model.startswith("slow-") else itl
        limit_headers: dict[str, str] | None = None
        if model.startswith("quota-"):
            limit_headers, allowed = _quota(quotas, model, int(model[6:]), arrived)
            if not allowed:
                return web.json_response(
                    {"error": {"message": "Rate limit reached for requests", "type": "requests"}},
                    status=429,
                    headers=limit_headers,
                )
        if model.startswith("status-"):
            status = int(model[7:])
            headers = {"Retry-After": "1"} if status == 429 else None
            return web.json_response(
                {"error": {"message": f"scripted {status}", "type": "scripted"}}, status=status, headers=headers
            )
        if model == "echo-auth":  # a careless gateway that repeats the credential it rejects
            message = f"invalid credential: {request.headers.get('Authorization')}"
            return web.json_response({"error": {"message": message, "type": "scripted"}}, status=401)
        if model == "stall":
            await asyncio.sleep(3600)
        words = [" " + VOCABULARY[i % len(VOCABULARY)] for i in range(n)]
        usage = {"prompt_tokens": _prompt_tokens(body, chat), "completion_tokens": n,
                 "total_tokens": _prompt_tokens(body, chat) + n}  # fmt: skip
        if not body.get("stream"):
            await _until(arrived + ttft + gap * (n - 1))
            text = "".join(words)
            choice = {"index": 0, "finish_reason": "length",
                      **({"message": {"role": "assistant", "content": text}} if chat else {"text": text})}  # fmt: skip
            return web.json_response({"id": "cmpl-scripted", "object": "chat.completion" if chat else "text_completion",
                                      "model": model, "choices": [choice], "usage": usage}, headers=limit_headers)  # fmt: skip
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                           **(limit_headers or {})})  # fmt: skip
        await resp.prepare(request)
        for k, word in enumerate(words):
            await _until(arrived + ttft + gap * k)
            if model == "reset" and k == n // 2:
                request.transport.abort() if request.transport else None
                return resp
            if model == "garbage" and k == n // 2:
                await resp.write(b"data: {not json\n\n")
                continue
            await resp.write(_chunk(chat, model, word, "length" if k == n - 1 and model != "no-done" else None))
        if model == "no-done":
            return resp
        if model != "no-usage" and (body.get("stream_options") or {}).get("include_usage"):
            await resp.write(_chunk(chat, model, None, usage=usage))
        await resp.write(b"data: [DONE]\n\n")
        return resp

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "ok", "object": "model"}]})

    async def moved(request: web.Request) -> web.Response:
        status, prefix = (301, "/moved-301") if request.path.startswith("/moved-301/") else (307, "/moved")
        await request.read()
        location = request.path[len(prefix) :]
        if request.path.startswith("/moved-away/"):  # the same server under another name: another origin
            prefix = "/moved-away"
            location = f"http://localhost:{request.url.port}{request.path[len(prefix) :]}"
        return web.Response(status=status, headers={"Location": location}, text="moved")

    async def health(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def counted(request: web.Request) -> web.Response:
        return web.json_response(stats)

    app = web.Application()  # handlers are coroutines: aiohttp deprecates bare functions
    app.router.add_route("*", "/moved/{rest:.*}", moved)
    app.router.add_route("*", "/moved-301/{rest:.*}", moved)
    app.router.add_route("*", "/moved-away/{rest:.*}", moved)
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_post("/v1/completions", completions)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/health", health)
    app.router.add_get("/stats", counted)
    return app


def _quota(quotas: dict[str, list[float]], model: str, limit: int, now: float) -> tuple[dict[str, str], bool]:
    """Count a request against ``model``'s quota of ``limit`` a second: its headers, and whether it is allowed."""
    window = quotas.setdefault(model, [now, 0, 0])
    if now - window[0] >= 1.0:
        window[:] = [now, 0, 0]
    allowed = window[1] < limit
    if allowed:
        window[1] += 1
        window[2] += 100  # tokens charged per request
    reset_ms = max(math.ceil((window[0] + 1.0 - now) * 1000), 1)
    headers = {
        "x-ratelimit-limit-requests": str(limit),
        "x-ratelimit-remaining-requests": str(limit - int(window[1])),
        "x-ratelimit-limit-tokens": str(QUOTA_TOKENS),
        "x-ratelimit-remaining-tokens": str(QUOTA_TOKENS - int(window[2])),
        "x-ratelimit-reset-requests": f"{reset_ms}ms",
        "x-ratelimit-reset-tokens": f"{reset_ms}ms",
    }
    if not allowed:
        headers["retry-after"] = str(max(math.ceil(reset_ms / 1000), 1))
    return headers, allowed


async def serve(host: str, port: int, ttft: float, itl: float, tls: object = None) -> None:
    await serve_app(make_app(ttft, itl), host, port, tls=tls)  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> None:
    parser = server_argument_parser(__doc__)
    parser.add_argument("--ttft", type=float, default=0.0, help="seconds to the first token")
    parser.add_argument("--itl", type=float, default=0.0, help="seconds between tokens")
    add_tls_arguments(parser)
    args = parser.parse_args(argv)
    run_until_interrupted(serve(args.host, args.port, args.ttft, args.itl, tls_context(args)))


if __name__ == "__main__":
    main()
