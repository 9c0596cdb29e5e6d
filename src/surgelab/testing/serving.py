"""Serve an aiohttp app on loopback until cancelled, announcing the port on stdout.

The test servers print ``listening on http://HOST:PORT`` once they accept connections, which
is how the process helpers learn a port the OS chose."""

from __future__ import annotations

import asyncio

from aiohttp import web

__all__ = ["serve_app"]


async def serve_app(app: web.Application, host: str, port: int, backlog: int = 4096) -> None:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=backlog)
    await site.start()
    print(f"listening on http://{host}:{runner.addresses[0][1]}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
