"""A lean HTTP/1.1 client for the request hot path: pooled connections, a C parser, nothing else.

Why not aiohttp here: between the send timestamp and the request's bytes on the wire its
client spends about 0.8 ms (URL objects, cookie jar, tracing hooks, a writer task), which
every TTFT measured from the intended send time includes; and it costs about 40 % more CPU
per streamed request. This client writes one pre-built request with one ``write`` and parses
the answer with ``httptools`` (llhttp, the parser uvicorn uses), handing body bytes to the
reader as they arrive. It speaks what inference APIs need: keep-alive pooling with an
optional cap, chunked and length-delimited bodies, TLS (``client/network.py``: a CA bundle, a
client certificate, SNI), HTTP proxies (``CONNECT`` tunnels for HTTPS), gzip/deflate bodies. It
does not follow redirects itself; the transport decides about a 3xx (``target.redirects``).
A response on a new connection carries the time its connection took (``connect_ns``,
``tls_ns``); one on a reused connection carries none.

Keep-alive with servers as they are: a pooled connection is handed out only while the server
has not closed it (checked on the socket itself, not only through the event loop), its
``Keep-Alive: timeout=…, max=…`` allows another request, and the answer did not say
``Connection: close``. A request whose bytes were written is sent again only when the socket
proves that no server read it. A connection that closes before a byte of the answer may have
carried the request to a server that then died, or been cut by the network, and a load test
must count that (RFC 9112 §9.3.1 forbids retrying a non-idempotent request automatically; Go's
``net/http``, aiohttp and httpx do not resend a POST either): on a reused connection it is the
request's ``ServerDisconnected``, its message naming the reuse (``target.retry`` on
``connection_error`` retries such requests, visibly). The proof is the kernel's: the server's
FIN arrived first and its closed socket then answered the request's bytes with a reset
(``EPIPE`` on Linux, whose TCP reports a reset in CLOSE_WAIT so), seen at the close or looked
for a moment after it (20 ms, or four connect times up to 250 ms: a server may send its FIN and
close its socket on the unread request a little later; a request cut so is recorded that much
later). A server's close crossing the request leaves that mark (llama.cpp's llama-server
closes after every streamed answer, with keep-alive announced); a server or proxy that read the
request and then dropped it does not.
Such a request, and one on a pooled connection found closed before anything was written, is
sent on a new connection, once and visibly (``Response.resent``).
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
import select
import socket
import ssl
import zlib
from collections import deque
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

import httptools
from multidict import CIMultiDict

from surgelab import __version__
from surgelab.client.network import TLS_CLOSED, Proxy, dial, proxy_for
from surgelab.httpfields import header_name_problem, header_value_problem

__all__ = ["ConnectTimeout", "HttpPool", "InvalidResponse", "Response", "ServerDisconnected"]

_USER_AGENT = f"surgelab/{__version__}"
_HIGH_WATER = 1 << 20  # bytes buffered before reading from the socket pauses
_FRAMING = frozenset((b"content-length", b"content-encoding", b"transfer-encoding", b"keep-alive"))
_KEEP_ALIVE_PARAM = re.compile(rb"(timeout|max)\s*=\s*(\d+)", re.I)
_IDLE_MARGIN_S = 0.5  # give up on an idle connection this long before the server's announced timeout
_REUSED_CLOSED = "reused connection: a drop, or its idle close crossed the request"
_RESET_WAIT_S = 0.02  # after a clean close under a request, how long to look for the reset that proves it unread


class ConnectTimeout(Exception):
    """The TCP (or TLS) connection was not established in time."""


class ServerDisconnected(ConnectionError):
    """The server closed the connection before the response ended."""


class InvalidResponse(Exception):
    """The bytes the server sent are not a valid HTTP/1.1 response."""


@dataclass(frozen=True, slots=True)
class _Endpoint:
    key: tuple[bool, str, int]  # (tls, host, port): what a pooled connection is for
    path: bytes  # path and query, as sent on the request line
    host_header: bytes
    url: str  # scheme://host:port, what a proxy is chosen for


@lru_cache(maxsize=256)
def _endpoint(url: str) -> _Endpoint:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"cannot send to {url!r}: only http:// and https:// URLs are supported")
    tls = parts.scheme == "https"
    port = parts.port or (443 if tls else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host = parts.hostname
    shown = f"[{host}]" if ":" in host else host
    header = shown if port == (443 if tls else 80) else f"{shown}:{port}"
    scheme = "https" if tls else "http"
    return _Endpoint((tls, host, port), path.encode("ascii"), header.encode("idna"), f"{scheme}://{header}")


class _Connection(asyncio.Protocol):
    """One keep-alive connection; carries one response at a time and wakes its reader."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.lost = False
        self.response: Response | None = None
        self.parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self._fd = -1
        self.exchanges = 0  # requests sent on this connection
        self.idle_until = float("inf")  # loop time after which the server may close it (Keep-Alive: timeout)
        self.requests_left: int | None = None  # further requests the server allows (Keep-Alive: max)
        self.connect_ns: int | None = None  # how long the TCP connection (and a proxy's tunnel) took
        self.tls_ns: int | None = None  # how long the TLS handshake took
        self.closed_first = False  # the server had closed before the request's bytes reached it
        self._probe: socket.socket | None = None  # the socket kept past a clean close, to see the reset that may follow

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        self._fd = sock.fileno() if sock is not None else -1

    def data_received(self, data: bytes) -> None:
        response = self.response
        if response is None:  # bytes nobody asked for: the connection cannot be trusted
            self.close()
            return
        response.received += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            response.error = InvalidResponse(f"invalid HTTP response: {exc}")
            self.close()
        self._wake()
        if response.buffered > _HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        response = self.response
        if response is not None and not response.received and self.exchanges > 1:
            self.closed_first = isinstance(exc, BrokenPipeError) or self._socket_error() == errno.EPIPE
            if exc is None and not self.closed_first and self._fd >= 0:
                try:  # asyncio closes its socket next; a duplicate keeps it for the reset to land on
                    self._probe = socket.socket(fileno=os.dup(self._fd))
                except OSError:
                    self._probe = None
        if response is not None and not response.complete and response.error is None:
            if response.status and response.until_close:  # the close is what ends this body
                response.complete = True
            else:
                detail = f" ({type(exc).__name__}: {exc})" if exc else ""
                response.error = ServerDisconnected("server closed the connection before the response ended" + detail)
        self._wake()

    async def closed_before_reading(self, within: float) -> bool:
        """Whether the kernel shows that the server closed before reading the request: ``EPIPE`` at the
        loss, or within ``within`` seconds of it (a server may send its FIN, then close its socket on
        the request it never read a moment later: the reset comes then)."""
        probe, self._probe = self._probe, None
        if probe is None:
            return self.closed_first
        try:
            deadline = self.loop.time() + within
            while not self.closed_first and self.loop.time() < deadline:
                await asyncio.sleep(0.001)
                self.closed_first = probe.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == errno.EPIPE
        except OSError:
            pass
        finally:
            probe.close()
        return self.closed_first

    def _socket_error(self) -> int:
        """The socket's pending error (asyncio closes the socket only after ``connection_lost``)."""
        sock = self.transport.get_extra_info("socket") if self.transport is not None else None
        try:
            return sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) if sock is not None else 0
        except OSError:
            return 0

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self.response.raw_headers.append((name, value))  # type: ignore[union-attr]

    def on_headers_complete(self) -> None:
        self.response.headers_ready(self.parser.get_status_code(), self.parser.should_keep_alive())  # type: ignore[union-attr]

    def on_body(self, body: bytes) -> None:
        response = self.response
        response._chunks.append(body)  # type: ignore[union-attr]
        response.buffered += len(body)  # type: ignore[union-attr]

    def on_message_complete(self) -> None:
        self.response.complete = True  # type: ignore[union-attr]

    # the reader's side
    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        """Until the next bytes, the end of the response, or the loss of the connection."""
        self._waiter = self.loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def resume(self) -> None:
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()

    @property
    def reusable(self) -> bool:
        return not self.lost and self.transport is not None and not self.transport.is_closing()

    def fit_for_another(self, now: float) -> bool:
        """Whether a pooled connection may carry another request: open, within the server's
        keep-alive terms, and with nothing waiting on its socket (an idle connection that is
        readable holds the server's FIN, or bytes nobody asked for)."""
        if not self.reusable or now >= self.idle_until or self.requests_left == 0:
            return False
        if self._fd < 0:
            return True
        try:
            readable, _, _ = select.select((self._fd,), (), (), 0)
        except (OSError, ValueError):
            return False
        return not readable

    def settle_terms(self, response: Response, now: float) -> None:
        """Remember what the answer said about keeping the connection (``Keep-Alive: timeout=T, max=N``)."""
        timeout, most = response.keep_alive_terms
        self.idle_until = now + timeout - _IDLE_MARGIN_S if timeout is not None else float("inf")
        if most is not None:
            self.requests_left = max(most - 1, 0)  # Apache counts this answer in: max=1 is the last

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        if self._probe is not None:
            self._probe.close()
            self._probe = None


class Response:
    """Status, headers and the body as it arrives; ``content`` is the response itself.

    The reading methods are the part of aiohttp's ``StreamReader`` the kinds use
    (``iter_any``, ``read``), so a kind reads a response the same way whichever client sent it.
    """

    def __init__(self, conn: _Connection, head_only: bool) -> None:
        self._conn = conn
        self._head_only = head_only
        self.status = 0
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self.content_length: int | None = None
        self._headers: CIMultiDict[str] | None = None
        self.keep_alive = False
        self.complete = False
        self.until_close = False
        self.error: Exception | None = None
        self.buffered = 0
        self.received = 0  # bytes of this answer so far, head included
        self.resent = False  # sent again on a new connection after the reused one turned out closed
        self.connect_ns: int | None = None  # set when this answer came on a new connection
        self.tls_ns: int | None = None
        self.keep_alive_terms: tuple[int | None, int | None] = (None, None)
        self._chunks: deque[bytes] = deque()
        self._pending = b""  # already decoded bytes a read(n) did not hand out
        self._decoder: zlib._Decompress | None = None

    @property
    def unread(self) -> bool:
        return bool(self._chunks or self._pending)

    @property
    def content(self) -> Response:
        return self

    @property
    def headers(self) -> CIMultiDict[str]:
        """Decoded on first use: most successful responses never need them."""
        if self._headers is None:
            self._headers = CIMultiDict((k.decode("latin-1"), v.decode("latin-1")) for k, v in self.raw_headers)
        return self._headers

    def headers_ready(self, status: int, keep_alive: bool) -> None:
        framing = {k.lower(): v for k, v in self.raw_headers if k.lower() in _FRAMING}
        encoding = framing.get(b"content-encoding", b"identity").strip().lower()
        if encoding in (b"gzip", b"x-gzip", b"deflate"):
            self._decoder = zlib.decompressobj(wbits=47)  # a gzip or a zlib header, detected
        elif encoding != b"identity":
            self.error = InvalidResponse(f"unsupported Content-Encoding {encoding.decode('latin-1')!r}")
        length = framing.get(b"content-length", b"").strip()
        self.content_length = int(length) if length.isdigit() else None
        terms = dict((k.lower(), int(v)) for k, v in _KEEP_ALIVE_PARAM.findall(framing.get(b"keep-alive", b"")))
        self.keep_alive_terms = (terms.get(b"timeout"), terms.get(b"max"))
        no_body = self._head_only or status in (204, 304)
        chunked = b"chunked" in framing.get(b"transfer-encoding", b"").lower()
        self.until_close = not (no_body or chunked or self.content_length is not None)
        self.status, self.keep_alive = status, keep_alive
        if no_body:
            self.complete = True

    async def _next_event(self) -> None:
        if self._conn.lost:  # connection_lost has settled this response already
            if not self.complete and self.error is None:
                self.error = ServerDisconnected("server closed the connection")
            return
        await self._conn.wait()

    async def wait_headers(self) -> None:
        while not self.status and self.error is None:
            await self._next_event()
        if self.error is not None:
            raise self.error

    async def readany(self) -> bytes:
        """The bytes that have arrived since the last read (waiting for some); ``b""`` at the end."""
        if self._pending:
            data, self._pending = self._pending, b""
            return data
        while True:
            while not self._chunks:
                if self.error is not None:
                    raise self.error
                if self.complete:
                    return self._decoded_rest()
                await self._next_event()
            data = self._chunks.popleft() if len(self._chunks) == 1 else b"".join(self._chunks)
            self._chunks.clear()
            self.buffered = 0
            self._conn.resume()
            if self._decoder is None:
                return data
            try:
                data = self._decoder.decompress(data)
            except zlib.error as exc:
                raise InvalidResponse(f"invalid compressed body: {exc}") from None
            if data:  # a compressed piece can decode to nothing yet (a gzip header alone): b"" means the end
                return data

    def _decoded_rest(self) -> bytes:
        """What the decompressor still holds at the end of the body (once), else ``b""``."""
        if self._decoder is None:
            return b""
        rest, self._decoder = self._decoder.flush(), None
        return rest

    async def iter_any(self) -> AsyncIterator[bytes]:
        while data := await self.readany():
            yield data

    async def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes (all of them when ``n < 0``), fewer only at the end of the body."""
        out = bytearray()
        while n < 0 or len(out) < n:
            data = await self.readany()
            if not data:
                break
            out += data
        if 0 <= n < len(out):  # keep what was not asked for
            self._pending = bytes(out[n:])
            del out[n:]
        return bytes(out)


class _Exchange:
    """``async with pool.request(...) as response``: sends on enter, releases the connection on exit."""

    __slots__ = ("_pool", "_endpoint", "_method", "_request", "_conn", "_response", "_written")

    def __init__(self, pool: HttpPool, endpoint: _Endpoint, method: str, request: bytes) -> None:
        self._pool, self._endpoint, self._method, self._request = pool, endpoint, method, request
        self._conn: _Connection | None = None
        self._response: Response | None = None
        self._written = False

    async def __aenter__(self) -> Response:
        conn = await self._pool.acquire(self._endpoint)
        try:
            try:
                return await self._send(conn)
            except (ServerDisconnected, ConnectionError) as exc:
                response = self._response
                unanswered = response is None or not response.received
                if conn.exchanges == 1 and conn.tls_ns is not None and unanswered:
                    raise ServerDisconnected(f"{exc}: {TLS_CLOSED}") from None
                if conn.exchanges > 1 and unanswered and self._written:
                    rtt = (conn.connect_ns or 0) / 1e9  # the reset needs about a round trip more than the FIN
                    if not await conn.closed_before_reading(min(max(_RESET_WAIT_S, 4 * rtt), 0.25)):
                        raise ServerDisconnected(f"{exc} ({_REUSED_CLOSED})") from None
                if conn.exchanges == 1 or not unanswered:
                    raise  # a new connection's failure, or the server had begun to answer: the request's own
            # no server read the request (nothing went out, or the server's close came first): a new connection
            self._pool.release(self._endpoint, conn, keep=False)
            self._conn = None
            response = await self._send(await self._pool.connect(self._endpoint))
            response.resent = True
            return response
        except BaseException:  # failed, timed out or cancelled before the caller got the response: never pooled
            if self._conn is not None:
                self._conn.response = None
                self._pool.release(self._endpoint, self._conn, keep=False)
                self._conn = None
            raise

    async def _send(self, conn: _Connection) -> Response:
        self._conn = conn
        response = self._response = conn.response = Response(conn, head_only=self._method == "HEAD")
        conn.parser = httptools.HttpResponseParser(conn)
        conn.exchanges += 1
        if conn.exchanges == 1:
            response.connect_ns, response.tls_ns = conn.connect_ns, conn.tls_ns
        if not conn.reusable:
            raise ServerDisconnected("server closed the connection before the request was sent")
        conn.transport.write(self._request)  # type: ignore[union-attr]
        self._written = True
        await response.wait_headers()
        return response

    async def __aexit__(self, *exc: object) -> None:
        conn, response = self._conn, self._response
        if conn is None:
            return
        conn.response = None
        keep = response is not None and response.complete and response.error is None and response.keep_alive
        keep = keep and not response.unread and self._method != "HEAD"  # type: ignore[union-attr]
        if keep:
            conn.settle_terms(response, conn.loop.time())  # type: ignore[arg-type]
        self._pool.release(self._endpoint, conn, keep)


class HttpPool:
    """Keep-alive connections per origin, at most ``limit`` open in all (0: no limit)."""

    def __init__(
        self,
        headers: Mapping[str, str],
        *,
        limit: int = 0,
        connect_timeout: float | None = None,
        keep_alive: bool = True,
        tls: ssl.SSLContext | None = None,
        server_name: str | None = None,
        proxy: str = "env",
    ) -> None:
        self._headers = {"User-Agent": _USER_AGENT, "Accept": "*/*", **headers}
        self._own_host = any(name.lower() == "host" for name in headers)  # the Host header given overrides the URL's
        if not keep_alive:
            self._headers["Connection"] = "close"
        self._header_bytes = _header_bytes(self._headers)
        self._limit = limit
        self._connect_timeout = connect_timeout
        self._keep_alive = keep_alive
        self._idle: dict[tuple[bool, str, int], list[_Connection]] = {}
        self._open: set[_Connection] = set()
        self._connecting = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._tls = tls
        self._server_name = server_name
        self._proxy_setting = proxy
        self._proxies: dict[tuple[bool, str, int], Proxy | None] = {}

    def proxy(self, endpoint: _Endpoint) -> Proxy | None:
        """The proxy for ``endpoint``'s origin (decided once per origin)."""
        key = endpoint.key
        if key not in self._proxies:
            self._proxies[key] = proxy_for(endpoint.url, self._proxy_setting)
        return self._proxies[key]

    def request(
        self, method: str, url: str, body: bytes | None = None, headers: Mapping[str, str | None] | None = None
    ) -> _Exchange:
        """The exchange to enter; the request's bytes are built here, before anything is timed.

        ``headers`` are added to the pool's, a None leaving one of the pool's out."""
        endpoint = _endpoint(url)
        if headers:
            merged = {**self._headers, **headers}
            fields = _header_bytes({k: v for k, v in merged.items() if v is not None})
        else:
            fields = self._header_bytes
        length = (
            b"Content-Length: %d\r\n" % len(body or b"") if body is not None or method not in ("GET", "HEAD") else b""
        )
        target, host = endpoint.path, b"" if self._own_host else b"Host: %s\r\n" % endpoint.host_header
        proxy = self.proxy(endpoint) if not endpoint.key[0] else None
        if proxy is not None:  # plain HTTP through a proxy: the absolute URL on the request line
            target = endpoint.url.encode("idna") + endpoint.path
            fields += proxy.authorization
        head = b"%s %s HTTP/1.1\r\n%s%s%s\r\n" % (method.encode("ascii"), target, host, fields, length)
        return _Exchange(self, endpoint, method, head + body if body else head)

    @property
    def open_connections(self) -> int:
        return len(self._open)

    async def acquire(self, endpoint: _Endpoint) -> _Connection:
        while True:
            idle = self._idle.get(endpoint.key)
            now = asyncio.get_running_loop().time() if idle else 0.0
            while idle:
                conn = idle.pop()
                if conn.fit_for_another(now):
                    return conn
                conn.close()
                self._open.discard(conn)
            if not self._limit or len(self._open) + self._connecting < self._limit:
                return await self.connect(endpoint)
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if not waiter.done() or waiter.cancelled():
                    self._waiters.remove(waiter) if waiter in self._waiters else None

    async def connect(self, endpoint: _Endpoint) -> _Connection:
        """A new connection (counted against the limit while it is being made)."""
        loop = asyncio.get_running_loop()
        tls, host, port = endpoint.key
        context = None
        if tls:
            context = self._tls = self._tls or ssl.create_default_context()
        proxy = self.proxy(endpoint)
        self._connecting += 1  # the slot counts against the limit while the connection is made
        try:
            conn, connect_ns, tls_ns = await asyncio.wait_for(
                dial(
                    lambda: _Connection(loop), host, port, context=context, server_name=self._server_name, proxy=proxy
                ),
                self._connect_timeout,
            )
        except asyncio.TimeoutError:  # noqa: UP041 - on 3.10 wait_for raises this, not the builtin
            via = f" through proxy {proxy.url}" if proxy else ""
            raise ConnectTimeout(f"no connection to {host}:{port}{via}") from None
        finally:
            self._connecting -= 1
            self._wake_one()
        assert isinstance(conn, _Connection)
        conn.connect_ns, conn.tls_ns = connect_ns, tls_ns
        self._open.add(conn)
        return conn

    def release(self, endpoint: _Endpoint, conn: _Connection, keep: bool) -> None:
        if keep and self._keep_alive and conn.reusable:
            self._idle.setdefault(endpoint.key, []).append(conn)
        else:
            conn.close()
            self._open.discard(conn)
        self._wake_one()

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def close(self) -> None:
        for conn in self._open:
            conn.close()
        self._open.clear()
        self._idle.clear()
        await asyncio.sleep(0)  # let the transports finish closing


def _header_bytes(headers: Mapping[str, str]) -> bytes:
    """The header lines; ValueError for one that cannot be sent (the scenario's checks name it first)."""
    for name, value in headers.items():
        problem = header_name_problem(name) or header_value_problem(value)
        if problem:
            raise ValueError(f"header {name!r} cannot be sent: {problem}")
    return "".join(f"{name}: {value}\r\n" for name, value in headers.items()).encode("latin-1")
