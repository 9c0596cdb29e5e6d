"""The scripted completion as a bare ASGI app, served by uvicorn (h11 or httptools), hypercorn or granian.

A bare app (no framework) so the only HTTP code between the script and the socket is the
server's own: the app never sets a framing header, so a streamed answer is chunked and a
whole one carries the Content-Length the app gives, as each server decides. The idle timeout
is each server's own setting: uvicorn ``timeout_keep_alive``, hypercorn ``keep_alive_timeout``,
granian ``--http1-header-read-timeout`` (hyper's header-read timer, which also runs while a
kept-alive connection waits for its next request). None of the three limits requests per
connection (uvicorn's ``limit_max_requests`` and hypercorn's ``max_requests`` stop the whole
server), so ``--max-requests`` is refused rather than imitated.

    python asgi_server.py --server uvicorn-h11 --port 8000 [--idle-timeout 0.3]

The script reaches granian's worker process through the environment (``INTEROP_SCRIPT``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

from script import PATHS, Connections, Script, options, until

SERVERS = ("uvicorn-h11", "uvicorn-httptools", "hypercorn", "granian")
_ENV = "INTEROP_SCRIPT"

script = Script(*json.loads(os.environ.get(_ENV, "[0.05, 0.01, 8]")))
connections = Connections()


async def app(scope, receive, send) -> None:
    if scope["type"] == "lifespan":
        while (message := await receive())["type"].startswith("lifespan."):
            await send({"type": message["type"] + ".complete"})
            if message["type"] == "lifespan.shutdown":
                return
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/health":
        await _answer(send, b"ok", b"text/plain")
    elif path == "/stats":
        await _answer(send, connections.report(), b"application/json")
    elif path in PATHS and scope["method"] == "POST":
        await _complete(scope, receive, send)
    else:
        await _answer(send, b"not found", b"text/plain", 404)


async def _complete(scope, receive, send) -> None:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    arrived = time.monotonic()
    connections.seen(tuple(scope.get("client") or ("?", 0)))
    stream, usage = script.asks(body)
    if not stream:
        await until(script.due(arrived, script.tokens - 1))
        await _answer(send, script.whole(), b"application/json")
        return
    headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    async for data in script.astream(arrived, usage, scope["path"]):
        await send({"type": "http.response.body", "body": data, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _answer(send, body: bytes, content_type: bytes, status: int = 200) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    parser = options(__doc__)
    parser.add_argument("--server", choices=SERVERS, required=True)
    args = parser.parse_args()
    if args.max_requests:
        sys.exit(f"{args.server} has no per-connection request limit")
    os.environ[_ENV] = json.dumps([args.ttft, args.itl, args.tokens])
    global script
    script = Script(args.ttft, args.itl, args.tokens)
    idle = args.idle_timeout or None
    if args.server.startswith("uvicorn"):
        import uvicorn

        extra = {"timeout_keep_alive": idle} if idle else {}
        uvicorn.run(app, host="127.0.0.1", port=args.port, http=args.server.split("-")[1], log_level="warning",
                    lifespan="off", **extra)  # fmt: skip
    elif args.server == "hypercorn":
        from hypercorn.asyncio import serve
        from hypercorn.config import Config

        config = Config()
        config.bind = [f"127.0.0.1:{args.port}"]
        config.keep_alive_timeout = idle or config.keep_alive_timeout
        asyncio.run(serve(app, config))
    else:
        from granian import Granian
        from granian.constants import HTTPModes, Interfaces
        from granian.http import HTTP1Settings

        settings = HTTP1Settings(header_read_timeout=int(idle * 1000)) if idle else HTTP1Settings()
        Granian("asgi_server:app", address="127.0.0.1", port=args.port, interface=Interfaces.ASGI,
                http=HTTPModes.http1, workers=1, websockets=False, http1_settings=settings, log_enabled=False,
                working_dir=Path(__file__).parent).serve()  # fmt: skip


if __name__ == "__main__":
    main()
