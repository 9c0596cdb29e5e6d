"""Serve an aiohttp app on loopback until cancelled, announcing the port on stdout.

The test servers print ``listening on http://HOST:PORT`` once they accept connections, which
is how the process helpers learn a port the OS chose. Their command lines share
``server_argument_parser`` and ``run_until_interrupted``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ssl
from collections.abc import Callable, Coroutine
from typing import Any

from aiohttp import web

from surgelab.aio import run_async
from surgelab.server.run import tls_context as server_tls_context

__all__ = [
    "add_tls_arguments", "run_timed_server", "run_until_interrupted", "serve_app", "server_argument_parser", "tls_context",
]  # fmt: skip


async def serve_app(
    app: web.Application, host: str, port: int, backlog: int = 4096, tls: ssl.SSLContext | None = None
) -> None:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=backlog, ssl_context=tls)
    await site.start()
    print(f"listening on {'https' if tls else 'http'}://{host}:{runner.addresses[0][1]}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def server_argument_parser(doc: str) -> argparse.ArgumentParser:
    """A test server's command line so far: the first line of ``doc`` as its description,
    ``--host`` (loopback by default) and ``--port`` (0 by default: one the OS picks)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    return parser


def add_tls_arguments(parser: argparse.ArgumentParser) -> None:
    """``--cert`` and ``--key`` (serve HTTPS), ``--client-ca`` (and ask every client for a certificate it signed)."""
    parser.add_argument("--cert", help="PEM certificate chain: serve HTTPS")
    parser.add_argument("--key", help="PEM key of --cert (when not in the same file)")
    parser.add_argument("--client-ca", help="PEM CA: require client certificates it signed (mutual TLS)")


def tls_context(args: argparse.Namespace) -> ssl.SSLContext | None:
    """The server's TLS context from ``add_tls_arguments``' options; None without ``--cert``."""
    return server_tls_context(args.cert, args.key, args.client_ca)


def run_timed_server(
    doc: str, serve: Callable[[str, int, float, float], Coroutine[Any, Any, None]], argv: list[str] | None = None
) -> None:
    """The command line of a server with a scripted TTFT and ITL (``--ttft``, ``--itl`` in seconds), run."""
    parser = server_argument_parser(doc)
    parser.add_argument("--ttft", type=float, default=0.0, help="seconds to the first token")
    parser.add_argument("--itl", type=float, default=0.0, help="seconds between tokens")
    args = parser.parse_args(argv)
    run_until_interrupted(serve(args.host, args.port, args.ttft, args.itl))


def run_until_interrupted(server: Coroutine[Any, Any, None]) -> None:
    """Run ``server`` on surgelab's event loop; Ctrl-C ends it quietly."""
    with contextlib.suppress(KeyboardInterrupt):
        run_async(server)
