"""The live dashboard: an observer of the run with a small aiohttp server in its own thread.

It only ever *reads* what the runner already computes: each ``LiveSnapshot`` the runner hands
its observers (twice a second) becomes a small dict appended to a bounded history — that is
all the run's event loop ever does for it. The HTTP server runs on a separate event loop in a
daemon thread, so a slow or greedy browser cannot delay a scheduled send. Browsers poll
``/api/state?since=SEQ`` and receive every entry after ``SEQ`` — the whole history on first
load, so a late or reconnecting browser sees the run since its start. It binds 127.0.0.1 by
default, takes an optional access token, and stops with the run (``stop``).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import hmac
import math
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

import orjson
from aiohttp import web

from surgelab.dashboard.gauges import poll_gauges
from surgelab.dashboard.page import render_page
from surgelab.exposure import exposure_error
from surgelab.metrics.live import LiveSnapshot
from surgelab.metrics.record import Outcome
from surgelab.metrics.store import RecordMeta
from surgelab.report.assets import plotly_js_path

__all__ = ["DashboardSettings", "Dashboard"]
RATE_WINDOW_S = 5.0
MAX_HISTORY = 7200  # entries; when full, older entries are thinned to every other one


@dataclass(frozen=True)
class DashboardSettings:
    host: str = "127.0.0.1"
    port: int = 0  # 0: any free port (printed)
    token: str | None = None
    title: str = "surgelab run"
    scrape: tuple[str, ...] = ()  # the target's Prometheus endpoints: running/waiting/KV gauges in the pipeline


class Dashboard:
    """History of snapshots plus the HTTP server that serves it (a runner ``Observer``)."""

    def __init__(self, settings: DashboardSettings) -> None:
        self.settings = settings
        self.history: list[dict[str, Any]] = []
        self.seq = 0
        self.points: list[dict[str, Any]] = []  # sweep levels: a growing throughput–latency curve
        self.gauges: dict[str, float] = {}  # target telemetry (waiting, running, KV usage) when scraped
        self.finished = False
        self.requests_served = 0
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._poller: asyncio.Future[None] | None = None
        self._arrivals: deque[tuple[float, int]] = deque([(0.0, 0)])
        self._page = b""
        self.url = ""

    # ---------------------------------------------------------------- fed by the run

    def observe(self, meta: RecordMeta, out: Outcome) -> None:
        """Per request: nothing (the snapshot already counts everything shown)."""

    def update(self, s: LiveSnapshot) -> None:
        """Record one snapshot (called on the run's event loop; cheap)."""
        # arrivals over the same trailing window as the runner's send and completion rates
        self._arrivals.append((s.elapsed_s, s.scheduled))
        while len(self._arrivals) > 2 and s.elapsed_s - self._arrivals[1][0] >= RATE_WINDOW_S:
            self._arrivals.popleft()
        t0, n0 = self._arrivals[0]
        arrival_rate = (s.scheduled - n0) / (s.elapsed_s - t0) if s.elapsed_s > t0 else 0.0
        entry = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(s).items()}
        sent_done = s.ok + s.failed + s.cancelled
        entry["queue"] = max(s.scheduled - s.dropped - s.in_flight - sent_done, 0)
        entry["arrival_rate"] = arrival_rate
        telemetry = getattr(s, "telemetry", None)
        if isinstance(telemetry, dict):
            self.gauges.update(telemetry)
        if self.gauges:
            entry["gauges"] = dict(self.gauges)
        self.seq += 1
        entry["seq"] = self.seq
        self.history.append(entry)
        if len(self.history) > MAX_HISTORY:
            half = len(self.history) // 2
            self.history = self.history[:half:2] + self.history[half:]

    def add_point(self, point: dict[str, Any]) -> None:
        """A finished sweep level: ``{"offered", "throughput", "ttft_p99_ms", "e2e_p99_ms"}``."""
        self.points.append(point)

    def on_level(self, row: Any) -> None:
        """``run_sweep(on_level=...)``: a finished level (a ``LevelRow``) becomes a point of the live curve."""
        self.add_point({"offered": row.offered, "throughput": row.requests_per_s,
                        "ttft_p99_ms": row.latency("ttft", "p99"), "e2e_p99_ms": row.latency("e2e", "p99")})  # fmt: skip

    def set_gauges(self, gauges: dict[str, float]) -> None:
        """The target's latest gauges (``running``, ``waiting``, ``kv_usage`` as a fraction)."""
        self.gauges = {**self.gauges, **gauges}

    # ---------------------------------------------------------------- HTTP

    def _authorised(self, request: web.Request) -> bool:
        token = self.settings.token
        if not token:
            return True
        given = request.query.get("token") or request.headers.get("X-Surgelab-Token", "")
        return hmac.compare_digest(given.encode(), token.encode())

    @web.middleware
    async def _guard(self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]):
        if request.path != "/plotly.min.js" and not self._authorised(request):  # the library holds no data
            return web.Response(status=403, text="forbidden: this dashboard needs ?token=...")
        self.requests_served += 1
        return await handler(request)

    async def _index(self, request: web.Request) -> web.Response:
        return web.Response(body=self._page, content_type="text/html")

    async def _plotly(self, request: web.Request) -> web.StreamResponse:
        # sendfile: the 1.2 MB library goes from disk to socket without holding the GIL
        return web.FileResponse(plotly_js_path(), headers={"Cache-Control": "max-age=3600",
                                                           "Content-Type": "application/javascript"})  # fmt: skip

    async def _state(self, request: web.Request) -> web.Response:
        try:
            since = int(request.query.get("since", "0"))
        except ValueError:
            since = 0
        new = self.history[bisect.bisect_right(self.history, since, key=lambda e: e["seq"]) :]
        body = {"seq": self.seq, "finished": self.finished, "title": self.settings.title, "history": new,
                "points": self.points, "gauges": self.gauges}  # fmt: skip
        return web.Response(body=orjson.dumps(body), content_type="application/json", headers={"Cache-Control": "no-store"})

    async def _serve(self, ready: threading.Event, failure: list[BaseException]) -> None:
        app = web.Application(middlewares=[self._guard])
        app.router.add_get("/", self._index)
        app.router.add_get("/plotly.min.js", self._plotly)
        app.router.add_get("/api/state", self._state)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        try:
            await self._runner.setup()
            site = web.TCPSite(self._runner, self.settings.host, self.settings.port, backlog=16)
            await site.start()
            port = self._runner.addresses[0][1]
            query = f"?token={self.settings.token}" if self.settings.token else ""
            self.url = f"http://{self.settings.host}:{port}/{query}"
            if self.settings.scrape:
                self._poller = asyncio.ensure_future(poll_gauges(self.settings.scrape, self.set_gauges))
        except BaseException as exc:  # reported to the starting thread
            failure.append(exc)
        finally:
            ready.set()

    def start(self, timeout: float = 10.0) -> str:
        """Start the server thread; return the URL to open (OSError when it cannot listen)."""
        refusal = exposure_error(self.settings.host, self.settings.token, "the dashboard", "a token")
        if refusal:
            raise PermissionError(refusal)
        self._page = render_page(self.settings.title).encode()  # built before the run, not during it
        ready, failure = threading.Event(), []
        self._loop = asyncio.new_event_loop()

        def main() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._loop.create_task(self._serve(ready, failure))
            self._loop.run_forever()
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

        self._thread = threading.Thread(target=main, name="surgelab-dashboard", daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise OSError("the dashboard did not start in time")
        if failure:
            self.stop()
            raise failure[0]
        return self.url

    def stop(self, timeout: float = 5.0) -> None:
        """Mark the run finished, close the server and join its thread (bounded)."""
        self.finished = True
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def close() -> None:
            if self._poller is not None:
                self._poller.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._poller
            if self._runner is not None:
                await self._runner.cleanup()
            loop.stop()

        if loop.is_running():
            asyncio.run_coroutine_threadsafe(close(), loop)
        thread.join(timeout)
        self._loop = self._thread = None
