"""Run the server until SIGINT/SIGTERM, on uvloop where available."""

from __future__ import annotations

import asyncio
import signal
import ssl
import sys
from collections.abc import Coroutine
from typing import Any

from aiohttp import web
from prometheus_client import disable_created_metrics

from surgelab.server.app import build_app
from surgelab.server.config import ServerConfig

__all__ = ["serve", "tls_context"]


def tls_context(cert: str | None, key: str | None = None, client_ca: str | None = None) -> ssl.SSLContext | None:
    """HTTPS when ``cert`` is given; with ``client_ca``, only clients holding a certificate it signed."""
    if not cert:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    if client_ca:
        context.load_verify_locations(cafile=client_ca)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


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
        tls = tls_context(config.tls_cert, config.tls_key, config.tls_client_ca)
        site = web.TCPSite(runner, config.host, config.port, backlog=2048, ssl_context=tls)
        await site.start()
        host, port = runner.addresses[0][:2]
        scheme = "https" if tls else "http"
        print(
            f"surgelab serve: {config.served_model} (profile {config.profile.name}) on {scheme}://{host}:{port}/v1",
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
