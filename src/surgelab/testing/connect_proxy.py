"""A small HTTP forward proxy with exactly known behaviour, for tests and for trying proxies out.

It tunnels ``CONNECT host:port`` (HTTPS through a proxy), answering after ``--delay`` seconds
so the latency it adds is known, and passes absolute-form plain HTTP requests
(``GET http://host:port/path``) on to their host. It counts what it saw. Loopback only:

    python -m surgelab.testing.connect_proxy --port 3128 --delay 0.05

prints ``listening on http://127.0.0.1:3128`` once it accepts connections. In a test,
``with ConnectProxy(delay) as proxy`` runs it in a thread: ``proxy.url``, ``proxy.tunnels``,
``proxy.forwarded`` and ``proxy.auth`` (each connection's ``Proxy-Authorization``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from surgelab.testing.serving import run_until_interrupted, server_argument_parser

__all__ = ["ConnectProxy", "main"]

HOST = "127.0.0.1"


@dataclass
class ConnectProxy:
    """``with ConnectProxy(delay) as proxy``: ``proxy.url``; ``tunnels``, ``forwarded`` and ``auth`` say what it saw."""

    delay: float = 0.0
    tunnels: list[str] = field(default_factory=list)  # CONNECT targets
    forwarded: list[str] = field(default_factory=list)  # absolute-form request targets (first of each connection)
    auth: list[str | None] = field(default_factory=list)  # Proxy-Authorization of each connection
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def __enter__(self) -> ConnectProxy:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(asyncio.start_server(self._handle, HOST, 0), self._loop).result(
            5
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *_exc: object) -> None:
        async def stop() -> None:
            self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError):
            writer.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        fields = dict(line.split(":", 1) for line in lines[1:] if ":" in line)
        self.auth.append(next((v.strip() for k, v in fields.items() if k.lower() == "proxy-authorization"), None))
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            await asyncio.sleep(self.delay)
            up_reader, up_writer = await asyncio.open_connection(host.strip("[]"), int(port))
            self.tunnels.append(target)
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            parts = urlsplit(target)
            up_reader, up_writer = await asyncio.open_connection(parts.hostname, parts.port or 80)
            self.forwarded.append(target)
            up_writer.write(head)  # servers accept the absolute form: the head goes on as it came
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def _serve(proxy: ConnectProxy, host: str, port: int) -> None:
    server = await asyncio.start_server(proxy._handle, host, port)
    print(f"listening on http://{host}:{server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = server_argument_parser(__doc__)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before answering a CONNECT")
    args = parser.parse_args(argv)
    run_until_interrupted(_serve(ConnectProxy(delay=args.delay), args.host, args.port))


if __name__ == "__main__":
    main()
