"""The scripted server, instrumented: what it actually did, per request, as the fidelity truth.

Runs ``surgelab.testing.scripted_server``'s app unchanged, plus a middleware that notes when
each completion request reached the handler and a hook on the response's ``write`` that notes
the first and last SSE token chunk. ``GET /truth`` returns, per finished request, the server's
own TTFT (first token chunk − arrival), mean gap between token chunks and E2E (last token
chunk − arrival), in milliseconds. A client's error is its reported figure minus these (the
loopback round trip, well under a millisecond, is the only thing between them).

    python benchmarks/peers/truth_server.py --ttft 0.2 --itl 0.02   # prints "listening on URL"
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time

from aiohttp import web

from surgelab.runner.loop import run_async
from surgelab.testing.scripted_server import make_app

_original_write = web.StreamResponse.write


async def _write(self: web.StreamResponse, data: bytes) -> None:
    await _original_write(self, data)
    req = getattr(self, "_req", None)
    if req is not None and data.startswith(b"data: {") and b'"content"' in data:
        now = time.perf_counter()
        times = req.get("token_times")
        if times is not None:
            times.append(now)


web.StreamResponse.write = _write  # type: ignore[method-assign]


def instrumented(ttft: float, itl: float) -> web.Application:
    app = make_app(ttft, itl)
    done: list[tuple[float, float, float]] = []

    @web.middleware
    async def timing(request: web.Request, handler):  # type: ignore[no-untyped-def]
        if not request.path.endswith("/completions"):
            return await handler(request)
        request["token_times"] = times = []
        arrived = time.perf_counter()
        resp = await handler(request)
        if times:
            gaps = (times[-1] - times[0]) / (len(times) - 1) if len(times) > 1 else 0.0
            done.append(((times[0] - arrived) * 1000, gaps * 1000, (times[-1] - arrived) * 1000))
        return resp

    async def truth(request: web.Request) -> web.Response:
        return web.json_response({"ttft_ms": [d[0] for d in done], "itl_ms": [d[1] for d in done],
                                  "e2e_ms": [d[2] for d in done]})  # fmt: skip

    app.middlewares.append(timing)
    app.router.add_get("/truth", truth)
    return app


async def serve(host: str, port: int, ttft: float, itl: float) -> None:
    runner = web.AppRunner(instrumented(ttft, itl), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=4096)
    await site.start()
    print(f"listening on http://{host}:{runner.addresses[0][1]}", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ttft", type=float, default=0.0)
    parser.add_argument("--itl", type=float, default=0.0)
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        run_async(serve("127.0.0.1", args.port, args.ttft, args.itl))


if __name__ == "__main__":
    main()
