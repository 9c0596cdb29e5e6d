"""The fault-injection reverse proxy: forwards every request to one upstream, chunk by chunk.

Responses stream through as they arrive (an SSE stream stays incremental), so added latency,
per-chunk jitter, bandwidth limits, drops and stalls act on the stream the client sees. Each
request draws its faults from one seeded RNG in arrival order. ``/_proxy/health`` and
``/_proxy/stats`` are the proxy's own (never forwarded); the stats count what was injected.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

from surgelab.proxy.faults import Faults, Schedule

__all__ = ["ProxyConfig", "FaultProxy", "run_proxy"]

_HOP_BY_HOP = {
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
    "transfer-encoding", "upgrade", "host", "content-length",
}  # fmt: skip
_PIECE = 16 * 1024  # bandwidth-limited writes go out in pieces this size, so the rate is smooth
_STALL_POLL_S = 0.05


@dataclass(frozen=True)
class ProxyConfig:
    upstream: str
    host: str = "127.0.0.1"
    port: int = 0
    schedule: Schedule = Schedule()
    seed: int = 0


@dataclass
class _Stats:
    requests: int = 0
    forwarded: int = 0
    injected_errors: int = 0
    dropped: int = 0
    stalled: int = 0
    upstream_errors: int = 0
    chunks: int = 0
    bytes: int = 0
    active: dict[str, str] = field(default_factory=dict)


class _Link:
    """A shared bandwidth budget: each write reserves its bytes' time on one timeline."""

    def __init__(self) -> None:
        self._free_at = 0.0

    async def send(self, nbytes: int, rate: float) -> None:
        now = time.monotonic()
        start = max(now, self._free_at)
        self._free_at = start + nbytes / rate
        await asyncio.sleep(self._free_at - now)


class FaultProxy:
    """Runtime state of one proxy: its RNG, clock, link and counters; ``app`` is the aiohttp app."""

    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        self.upstream = config.upstream.rstrip("/")
        self.rng = random.Random(config.seed)
        self.started = time.monotonic()
        self.stats = _Stats()
        self.link = _Link()
        self._session: aiohttp.ClientSession | None = None
        self.app = web.Application(client_max_size=256 * 1024**2)
        self.app.router.add_get("/_proxy/health", _health)
        self.app.router.add_get("/_proxy/stats", self._stats)
        self.app.router.add_route("*", "/{tail:.*}", self.handle)
        self.app.on_startup.append(self._open)
        self.app.on_cleanup.append(self._close)

    async def _open(self, _app: web.Application) -> None:
        self.started = time.monotonic()
        connector = aiohttp.TCPConnector(limit=0, enable_cleanup_closed=True)
        self._session = aiohttp.ClientSession(
            connector=connector, auto_decompress=False, timeout=aiohttp.ClientTimeout(total=None, sock_connect=10)
        )

    async def _close(self, _app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()

    def faults_now(self) -> Faults:
        return self.config.schedule.at(time.monotonic() - self.started)

    async def _stats(self, _request: web.Request) -> web.Response:
        faults = self.faults_now()
        self.stats.active = {"faults": faults.describe()}
        return web.json_response({k: v for k, v in vars(self.stats).items()})

    async def handle(self, request: web.Request) -> web.StreamResponse:
        faults = self.faults_now()
        rng = self.rng
        self.stats.requests += 1
        # Every draw happens up front, in arrival order, so a seed fixes what each request gets.
        delay = rng.uniform(*faults.latency) if faults.latency[1] > 0 else 0.0
        error = rng.random() < faults.error_rate
        drop = rng.random() < faults.drop
        drop_at_start = faults.drop_point == "start" or (faults.drop_point == "any" and rng.random() < 0.5)
        stall = rng.random() < faults.stall_mid_stream
        jitter_rng = random.Random(rng.getrandbits(64))
        body = await request.read()
        if delay:
            await asyncio.sleep(delay)
        if error:
            self.stats.injected_errors += 1
            injected = {"error": {"message": f"injected by surgelab proxy: HTTP {faults.error_status}", "type": "proxy_fault"}}
            headers = {"Retry-After": "1"} if faults.error_status in (429, 503) else None
            return web.json_response(injected, status=faults.error_status, headers=headers)
        if drop and drop_at_start:
            return self._drop(request)
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        url = self.upstream + request.rel_url.path_qs
        response: web.StreamResponse | None = None
        try:
            async with self._session.request(request.method, url, data=body or None, headers=headers) as upstream:
                self.stats.forwarded += 1
                response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
                for name, value in upstream.headers.items():
                    if name.lower() not in _HOP_BY_HOP:
                        response.headers.add(name, value)
                await response.prepare(request)
                first = True
                async for chunk in upstream.content.iter_any():
                    if faults.jitter_per_chunk:
                        await asyncio.sleep(jitter_rng.uniform(0, faults.jitter_per_chunk))
                    await self._write(response, chunk, faults)
                    if first and drop:
                        return self._drop(request)
                    if first and stall:
                        self.stats.stalled += 1
                        await self._hang(request, faults.stall_for)
                        return self._drop(request, count=False)
                    first = False
                await response.write_eof()
                return response
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:  # noqa: UP041
            if request.transport is None or request.transport.is_closing():
                return web.StreamResponse()  # the client left; nothing to answer
            self.stats.upstream_errors += 1
            if response is not None and response.prepared:  # the upstream broke mid-response: pass the break on
                return self._drop(request, count=False)
            message = f"surgelab proxy: upstream unavailable: {type(exc).__name__}"
            return web.json_response({"error": {"message": message, "type": "proxy_upstream"}}, status=502)

    async def _write(self, response: web.StreamResponse, chunk: bytes, faults: Faults) -> None:
        self.stats.chunks += 1
        self.stats.bytes += len(chunk)
        if not faults.bandwidth:
            await response.write(chunk)
            return
        for i in range(0, len(chunk), _PIECE):
            piece = chunk[i : i + _PIECE]
            await self.link.send(len(piece), faults.bandwidth)
            await response.write(piece)

    async def _hang(self, request: web.Request, limit_s: float) -> None:
        """Hold the connection open without a byte, until the client leaves or ``limit_s`` passes."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            transport = request.transport
            if transport is None or transport.is_closing():
                return
            await asyncio.sleep(_STALL_POLL_S)

    def _drop(self, request: web.Request, count: bool = True) -> web.StreamResponse:
        if count:
            self.stats.dropped += 1
        transport = request.transport
        if transport is not None:
            transport.abort()  # RST, as a lost connection looks to the client
        return web.StreamResponse()


async def _health(_request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def run_proxy(config: ProxyConfig, ready: asyncio.Future | None = None) -> None:
    """Serve until cancelled; print (or hand to ``ready``) the bound URL once it accepts connections."""
    proxy = FaultProxy(config)
    runner = web.AppRunner(proxy.app, access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, config.host, config.port, backlog=1024)
    await site.start()
    port = runner.addresses[0][1]
    url = f"http://{config.host}:{port}"
    if ready is not None:
        ready.set_result((url, proxy))
    else:
        print(f"surgelab proxy listening on {url} -> {proxy.upstream} ({config.schedule.base.describe()})", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
