"""The scripted completion served by Tornado, whose HTTP/1.1 code (``tornado.http1connection``)
shares nothing with the other Python stacks.

Tornado frames the answer itself: a handler that flushes before finishing gets a chunked
body, one that finishes at once a Content-Length. Its own settings: ``idle_connection_timeout``
of the HTTP server, and its gzip transform (``compress_response``), which honours
``Accept-Encoding``; the transform leaves bodies under ``MIN_LENGTH`` (1 KB) alone, so it is
given a floor of one byte for the script's 300-byte answer. Tornado has no per-connection
request limit and writes ``HTTP/1.1`` on every status line, so ``--max-requests`` is refused.

    python tornado_server.py --port 8000 [--idle-timeout 0.3]
"""

from __future__ import annotations

import asyncio
import sys
import time

import tornado.web
from script import PATHS, Connections, Script, options, until
from tornado.web import GZipContentEncoding


class AnySizeGZip(GZipContentEncoding):
    MIN_LENGTH = 1


def make_app(script: Script) -> tornado.web.Application:
    connections = Connections()

    class Complete(tornado.web.RequestHandler):
        async def post(self) -> None:
            arrived = time.monotonic()
            connections.seen(self.request.connection.stream)  # one IOStream per TCP connection
            stream, usage = script.asks(self.request.body)
            if not stream:
                await until(script.due(arrived, script.tokens - 1))
                self.set_header("Content-Type", "application/json")
                self.finish(script.whole())
                return
            self.set_header("Content-Type", "text/event-stream")
            self.set_header("Cache-Control", "no-cache")
            async for data in script.astream(arrived, usage, self.request.path):
                self.write(data)
                await self.flush()

    class Health(tornado.web.RequestHandler):
        def get(self) -> None:
            self.finish("ok")

    class Stats(tornado.web.RequestHandler):
        def get(self) -> None:
            self.set_header("Content-Type", "application/json")
            self.finish(connections.report())

    routes = [*((path, Complete) for path in PATHS), ("/health", Health), ("/stats", Stats)]
    return tornado.web.Application(routes, transforms=[AnySizeGZip])


async def serve(args) -> None:
    idle = {"idle_connection_timeout": args.idle_timeout} if args.idle_timeout else {}
    make_app(Script(args.ttft, args.itl, args.tokens)).listen(args.port, "127.0.0.1", **idle)
    print(f"tornado listening on http://127.0.0.1:{args.port}", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    args = options(__doc__).parse_args()
    if args.max_requests:
        sys.exit("tornado has no per-connection request limit")
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
