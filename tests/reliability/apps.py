"""Small loopback servers for reliability tests: in-process aiohttp apps and a runner for them.

``serving(app)`` runs an app on 127.0.0.1 (a free port) inside the test's event loop;
``proxying(upstream, ...)`` runs the fault proxy the same way. The apps misbehave in the
ways a real target can: huge bodies, endless lines, a drip of one byte at a time, and 429s
with Retry-After before an answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import orjson
from aiohttp import web

from surgelab.proxy import FaultProxy, ProxyConfig, Schedule, run_proxy


@contextlib.asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[str]:
    """``http://127.0.0.1:PORT`` while ``app`` serves."""
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await asyncio.wait_for(runner.cleanup(), 10)


@contextlib.asynccontextmanager
async def proxying(upstream: str, schedule: Schedule = Schedule(), seed: int = 0) -> AsyncIterator[tuple[str, FaultProxy]]:
    """The fault proxy in front of ``upstream``: (its URL, the proxy with its stats)."""
    ready: asyncio.Future = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(run_proxy(ProxyConfig(upstream=upstream, schedule=schedule, seed=seed), ready))
    try:
        url, proxy = await asyncio.wait_for(ready, 10)
        yield url, proxy
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def chunk(text: str, finish: str | None = None) -> bytes:
    body = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]}
    return b"data: " + orjson.dumps(body) + b"\n\n"


def misbehaving_app(drip_s: float = 0.002) -> web.Application:
    """``/big?bytes=N`` (a body of N bytes), ``/v1/chat/completions`` by model name:
    ``huge-line`` (an SSE line that never ends), ``huge-json`` (a 5 MB JSON body, unstreamed),
    ``drip-N`` (N tokens, sent one byte at a time, ``drip_s`` apart), ``limited-K``
    (429 with Retry-After: 0.2 for the first K requests of that model, then an answer),
    ``flaky-K`` (a reset before the headers for the first K requests, then an answer)."""
    seen: dict[str, int] = {}

    async def big(request: web.Request) -> web.StreamResponse:
        n = int(request.query.get("bytes", "1000"))
        resp = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        await resp.prepare(request)
        for i in range(0, n, 64 * 1024):
            await resp.write(b"x" * min(64 * 1024, n - i))
        await resp.write_eof()
        return resp

    async def completions(request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        model = str(body.get("model"))
        seen[model] = seen.get(model, 0) + 1
        if model.startswith("limited-") and seen[model] <= int(model[8:]):
            return web.json_response({"error": {"message": "slow down"}}, status=429, headers={"Retry-After": "0.2"})
        if model.startswith("flaky-") and seen[model] <= int(model[6:]):
            if request.transport is not None:
                request.transport.abort()
            return web.StreamResponse()
        if model == "huge-json":
            return web.Response(body=b'{"choices": [{"message": {"content": "' + b"a" * 5_000_000 + b'"}}]}',
                                content_type="application/json")  # fmt: skip
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        if model == "huge-line":
            deadline = time.monotonic() + 20
            await resp.write(b"data: {\"choices\": [{\"delta\": {\"content\": \"")
            while time.monotonic() < deadline:  # until the client gives up (or 20 s)
                try:
                    await resp.write(b"a" * 256 * 1024)
                except (ConnectionError, RuntimeError):
                    break
                await asyncio.sleep(0)
            return resp
        tokens = int(model[5:]) if model.startswith("drip-") else 4
        for k in range(tokens):
            for byte in chunk(" tok", "length" if k == tokens - 1 else None):
                await resp.write(bytes([byte]))
                if model.startswith("drip-"):
                    await asyncio.sleep(drip_s)
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def models(_request: web.Request) -> web.Response:
        return web.json_response({"data": []})

    app = web.Application()
    app.router.add_get("/big", big)
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_get("/v1/models", models)
    return app
