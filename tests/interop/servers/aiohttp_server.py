"""The scripted completion served by aiohttp.web; also the upstream behind nginx.

aiohttp frames the answer itself: a ``StreamResponse`` without a length is chunked, a whole
answer carries its Content-Length. Its own settings: the runner's ``keepalive_timeout`` for
idle connections, and ``enable_compression()``, which gzips a whole answer when the request
accepts gzip (Content-Length then counts the compressed bytes). aiohttp has no per-connection
request limit and writes every status line in the request's version, so ``--max-requests``
is refused.

Behind nginx a connection is nginx's (its ``$connection`` serial arrives as ``X-Conn``),
so ``/stats`` counts the client's connections to nginx, not nginx's to this upstream.

    python aiohttp_server.py --port 8000 [--idle-timeout 0.3]
"""

from __future__ import annotations

import asyncio
import sys
import time

from aiohttp import web
from script import PATHS, Connections, Script, options, until


def make_app(script: Script) -> web.Application:
    connections = Connections()

    async def complete(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        arrived = time.monotonic()
        connections.seen(request.headers.get("X-Conn") or request.transport)
        stream, usage = script.asks(body)
        if not stream:
            await until(script.due(arrived, script.tokens - 1))
            response = web.Response(body=script.whole(), content_type="application/json")
            response.enable_compression()  # only when the request accepts an encoding
            return response
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        async for data in script.astream(arrived, usage, request.path):
            await response.write(data)
        await response.write_eof()
        return response

    app = web.Application()
    for path in PATHS:
        app.router.add_post(path, complete)
    app.router.add_get("/health", lambda r: web.Response(text="ok"))
    app.router.add_get("/stats", lambda r: web.Response(body=connections.report(), content_type="application/json"))
    return app


async def serve(args) -> None:
    idle = {"keepalive_timeout": args.idle_timeout} if args.idle_timeout else {}
    runner = web.AppRunner(make_app(Script(args.ttft, args.itl, args.tokens)), access_log=None, **idle)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", args.port).start()
    print(f"aiohttp listening on http://127.0.0.1:{args.port}", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    args = options(__doc__).parse_args()
    if args.max_requests:
        sys.exit("aiohttp has no per-connection request limit")
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
