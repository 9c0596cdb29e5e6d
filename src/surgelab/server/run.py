"""Run the server until SIGINT/SIGTERM, on uvloop where available."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Coroutine
from typing import Any

from aiohttp import web
from prometheus_client import disable_created_metrics

from surgelab.server.app import build_app
from surgelab.server.config import ServerConfig

__all__ = ["serve"]


def serve(config: ServerConfig) -> None:
    """Block serving ``config`` until interrupted; prints one line with the URL when ready."""
    disable_created_metrics()  # process-wide, so only here: vLLM exposes no *_created series
    _run(_serve(config))


def _run(main: Coroutine[Any, Any, None]) -> None:
    try:
        import uvloop  # optional: faster sockets where installed (not on Windows)
    except ImportError:  # pragma: no cover - Windows
        asyncio.run(main)
    else:
        uvloop.run(main)


async def _serve(config: ServerConfig) -> None:
    runner = web.AppRunner(build_app(config), access_log=None, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, config.host, config.port, backlog=2048)
        await site.start()
        host, port = runner.addresses[0][:2]
        print(
            f"surgelab serve: {config.served_model} (profile {config.profile.name}) on http://{host}:{port}/v1",
            flush=True,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        print("surgelab serve: shutting down", file=sys.stderr, flush=True)
    finally:
        await runner.cleanup()
