"""The live dashboard: an observer of the run with a small aiohttp server in its own thread.

It only ever *reads* what the runner already computes: each ``LiveSnapshot`` the runner hands
its observers (twice a second) becomes a small dict appended to a bounded history — that is
all the run's event loop ever does for it, besides noting each finished request's end, TTFT and
E2E (three floats) so that the page shows the latency of the *last few seconds*, not of the
whole run so far. The HTTP server runs on a separate event loop in a daemon thread, so a slow
or greedy browser cannot delay a scheduled send. Browsers poll ``/api/state?since=SEQ`` and
receive every entry after ``SEQ`` — the whole history on first load, so a late or reconnecting
browser sees the run since its start. It binds 127.0.0.1 by default, takes an optional access
token, and stops with the run (``stop``): when ``finish`` has given it the run's verdict, it
keeps serving until every page that was watching has fetched that verdict (at most
``DashboardSettings.linger_s``), so each page keeps it on screen.

The page's stop button asks the run to stop as Ctrl-C does (``attach_stop``: the runner's
interrupt handler, see ``runner.interrupts``). Its ``POST /api/stop`` must carry the per-run
stop token that only the page itself holds (``X-Surgelab-Stop``, a header no form can send and no
other origin may send without the preflight this server never grants) and, when the browser says
where it comes from, this very origin: a page elsewhere cannot stop the run.

Rates are like for like: the target, arrival, send and completion rates are all means over
the same trailing window of whole seconds (``RATE_WINDOW_S``), so a spike in the target does
not make the client look over or under target while the trailing rates catch up.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import hmac
import math
import secrets
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import orjson
from aiohttp import web

from surgelab.analysis.verdict import run_verdict
from surgelab.dashboard.gauges import poll_gauges
from surgelab.dashboard.page import render_page
from surgelab.exposure import exposure_error
from surgelab.metrics.live import LiveSnapshot
from surgelab.metrics.record import Outcome
from surgelab.metrics.store import RecordMeta
from surgelab.report.assets import plotly_js_path
from surgelab.telemetry.scrape import ScrapeSource

__all__ = ["DashboardSettings", "Dashboard"]
RATE_WINDOW_S = 5  # whole seconds, as the runner's send and completion rates (metrics.live)
STOP_REASON = "interrupted (stop button on the dashboard)"
MAX_HISTORY = 7200  # entries; when full, older entries are thinned to every other one
_RECENT_KEEP = 50_000  # finished requests kept for the recent-window latency
FAVICON = (b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" '
           b'fill="#0f172a"/><path d="M2 12 L6 7 L9 10 L14 3" stroke="#38bdf8" stroke-width="2" fill="none"/></svg>')  # fmt: skip


@dataclass(frozen=True)
class DashboardSettings:
    host: str = "127.0.0.1"
    port: int = 0  # 0: any free port (printed)
    token: str | None = None
    title: str = "surgelab run"
    scrape: tuple[ScrapeSource, ...] = ()  # the target's Prometheus endpoints: running/waiting/KV gauges in the pipeline
    bounds: tuple[tuple[str, float], ...] = ()  # card → the bound that turns it red (lag_p99_ms, dropped, error_rate)
    linger_s: float = 5.0  # after the run: keep serving until a watching page has the verdict, at most this long


class Dashboard:
    """History of snapshots plus the HTTP server that serves it (a runner ``Observer``)."""

    def __init__(self, settings: DashboardSettings) -> None:
        self.settings = settings
        self.history: list[dict[str, Any]] = []
        self.seq = 0
        self.points: list[dict[str, Any]] = []  # sweep levels: a growing throughput–latency curve
        self.gauges: dict[str, float] = {}  # target telemetry (waiting, running, KV usage) when scraped
        self.finished = False
        self.verdict: dict[str, Any] | None = None  # the run's end: validity, thresholds, stop reason
        self.verdict_seen = threading.Event()  # every page watching has fetched the state with the verdict in it
        self._pollers: dict[str, float] = {}  # page id (?client=) → when it last polled (monotonic)
        self._told: set[str] = set()  # pages that have the verdict
        self.requests_served = 0
        # (end s, TTFT ms, E2E ms, TPOT ms, output tokens) of each success, for the trailing window
        self._recent: deque[tuple[float, float, float, float, float]] = deque(maxlen=_RECENT_KEEP)
        self._observed = False
        self._target_seen: deque[tuple[float, float]] = deque()  # (elapsed s, planned level) for the trailing mean
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._poller: asyncio.Future[None] | None = None
        self._arrivals: deque[tuple[float, int]] = deque([(0.0, 0)])
        self._page = b""
        self.url = ""
        self.stop_token = secrets.token_urlsafe(18)  # in the page only: what a stop request must carry
        self._stop: Callable[[str], bool] | None = None  # the run's interrupt, while a run is under way
        self.stop_requested: str | None = None

    # ---------------------------------------------------------------- fed by the run

    def observe(self, meta: RecordMeta, out: Outcome) -> None:
        """Per finished success: its end, TTFT and E2E, for the latency of the last few seconds."""
        self._observed = True  # requests reach the dashboard (with --workers or --ray, a flush after they ended)
        if out.end_ns is not None and not meta.warmup and out.state.value == "ok":
            ttft = (out.first_token_ns - meta.intended_ns) / 1e6 if out.first_token_ns is not None else math.nan
            tokens = out.output_tokens or 0
            tpot = (out.end_ns - out.first_token_ns) / (tokens - 1) / 1e6 if out.first_token_ns is not None and tokens > 1 else math.nan
            self._recent.append((out.end_ns / 1e9, ttft, (out.end_ns - meta.intended_ns) / 1e6, tpot, float(tokens)))

    def _recent_latency(self, now_s: float) -> dict[str, float | int | None]:
        """TTFT, E2E and TPOT P50/P99 of the successes that ended in the trailing window (with their count),
        and their output tokens per second over the window's whole seconds (as the achieved rates)."""
        lo, hi = self._window(now_s)
        recent = self._recent
        while recent and recent[0][0] < lo:  # only the window is kept: each update costs its requests, no more
            recent.popleft()
        out: dict[str, float | int | None] = {"recent_n": len(recent)}  # the current partial second counts too
        data = np.array(recent, dtype=float).reshape(-1, 5)
        whole = data[:, 0] < hi
        out["recent_tokens_per_s"] = round(float(data[whole, 4].sum()) / (hi - lo), 3) if hi > lo else None
        for col, name in ((1, "ttft"), (2, "e2e"), (3, "tpot")):
            values = data[:, col][np.isfinite(data[:, col])]
            for q in (50, 99):
                out[f"recent_{name}_p{q}_ms"] = round(float(np.percentile(values, q)), 3) if values.size else None
        return out

    @staticmethod
    def _window(now_s: float) -> tuple[float, float]:
        """The runner's rate window: the last ``RATE_WINDOW_S`` whole seconds before the current one."""
        current = int(now_s)
        return float(current - min(RATE_WINDOW_S, current)), float(current)

    def _trailing_target(self, s: LiveSnapshot) -> float | None:
        """The planned level (req/s) averaged over the same window as the achieved rates."""
        level = _level(s.target)
        if level is None:
            return None
        self._target_seen.append((s.elapsed_s, level))
        lo, hi = self._window(s.elapsed_s)
        while self._target_seen and self._target_seen[0][0] < lo - 1.0:
            self._target_seen.popleft()
        inside = [v for t, v in self._target_seen if lo <= t < hi]
        return sum(inside) / len(inside) if inside else level

    def _arrival_rate(self, s: LiveSnapshot) -> float:
        """Scheduled arrivals per second over the same window (from the snapshots' counts)."""
        self._arrivals.append((s.elapsed_s, s.scheduled))
        lo, hi = self._window(s.elapsed_s)
        while len(self._arrivals) > 2 and self._arrivals[1][0] <= lo:
            self._arrivals.popleft()
        before = [n for t, n in self._arrivals if t <= lo]
        upto = [n for t, n in self._arrivals if t <= hi]
        if hi <= lo or not upto:
            return 0.0
        return (upto[-1] - (before[-1] if before else 0)) / (hi - lo)

    def update(self, s: LiveSnapshot) -> None:
        """Record one snapshot (called on the run's event loop; cheap)."""
        arrival_rate = self._arrival_rate(s)
        entry = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(s).items()}
        entry["target_rate"] = self._trailing_target(s)
        if self._observed:  # else the page draws the whole run's latency, and says so
            entry.update(self._recent_latency(s.elapsed_s))
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

    def finish(self, summary: dict[str, Any], report: str | None = None) -> None:
        """The run's verdict (from its ``summary.json``), kept on the page after the run."""
        validity = summary.get("validity") or {}
        thresholds = summary.get("thresholds") or []
        self.verdict = {
            "valid": bool(validity.get("valid", True)),
            "reasons": list(validity.get("reasons", [])),
            "thresholds": [{"expr": t["expr"], "passed": t["passed"]} for t in thresholds],
            "thresholds_passed": bool(summary.get("thresholds_passed", True)),
            "stop_reason": summary.get("stop_reason", ""),
            "requests": (summary.get("requests") or {}).get("measured"),
            "report": report,
            "banner": summary.get("banner") or run_verdict(summary),  # a sweep hands its own banner
            "errors": summary.get("errors") or [],
            "diagnosis": list(summary.get("diagnosis") or []),
        }
        self.finished = True

    def attach_stop(self, stop: Callable[[str], bool] | None) -> None:
        """The run's interrupt (``Interrupts.request``) while it is under way; None after it."""
        self._stop = stop

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
        if request.path not in ("/plotly.min.js", "/favicon.ico") and not self._authorised(request):  # no data in those
            return web.Response(status=403, text="forbidden: this dashboard needs ?token=...")
        self.requests_served += 1
        return await handler(request)

    async def _index(self, request: web.Request) -> web.Response:
        return web.Response(body=self._page, content_type="text/html")

    async def _plotly(self, request: web.Request) -> web.StreamResponse:
        # sendfile: the 1.2 MB library goes from disk to socket without holding the GIL
        return web.FileResponse(plotly_js_path(), headers={"Cache-Control": "max-age=3600",
                                                           "Content-Type": "application/javascript"})  # fmt: skip

    def _watching(self, within_s: float = 3.0) -> set[str]:
        """The pages that polled in the last few seconds (a closed tab stops counting)."""
        now = time.monotonic()
        return {c for c, t in self._pollers.items() if now - t <= within_s}

    async def _favicon(self, request: web.Request) -> web.Response:
        return web.Response(body=FAVICON, content_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})

    async def _state(self, request: web.Request) -> web.Response:
        try:
            since = int(request.query.get("since", "0"))
        except ValueError:
            since = 0
        new = self.history[bisect.bisect_right(self.history, since, key=lambda e: e["seq"]) :]
        body = {"seq": self.seq, "finished": self.finished, "title": self.settings.title, "history": new,
                "points": self.points, "gauges": self.gauges, "verdict": self.verdict,
                "bounds": dict(self.settings.bounds), "stoppable": self._stop is not None and not self.finished,
                "stop_requested": self.stop_requested}  # fmt: skip
        client = request.query.get("client", "")
        self._pollers[client] = time.monotonic()
        if self.verdict is not None:
            self._told.add(client)
            if self._watching() <= self._told:
                self.verdict_seen.set()
        return web.Response(body=orjson.dumps(body), content_type="application/json", headers={"Cache-Control": "no-store"})

    def _same_origin(self, request: web.Request) -> bool:
        """The request comes from this dashboard's own page: the host it was opened at (no rebound name),
        and the browser's Origin and Sec-Fetch-Site, where it sends them, say this origin."""
        port = self._runner.addresses[0][1] if self._runner is not None and self._runner.addresses else None
        if self.settings.host in ("127.0.0.1", "localhost") and request.host not in (f"127.0.0.1:{port}", f"localhost:{port}"):
            return False  # a name rebound to 127.0.0.1 is another origin
        origin = request.headers.get("Origin")
        if origin is not None and origin != f"http://{request.host}":
            return False
        return request.headers.get("Sec-Fetch-Site", "same-origin") == "same-origin"

    async def _stop_run(self, request: web.Request) -> web.Response:
        given = request.headers.get("X-Surgelab-Stop", "")
        if not self._same_origin(request) or not hmac.compare_digest(given.encode(), self.stop_token.encode()):
            return web.json_response({"error": "forbidden: only this dashboard's own page can stop the run"}, status=403)
        stop = self._stop
        if self.stop_requested is not None:
            return web.json_response({"stopping": self.stop_requested}, status=202)
        if stop is None or self.finished or not stop(STOP_REASON):
            return web.json_response({"error": "no run under way to stop"}, status=409)
        self.stop_requested = STOP_REASON
        return web.json_response({"stopping": STOP_REASON}, status=202)

    async def _serve(self, ready: threading.Event, failure: list[BaseException]) -> None:
        app = web.Application(middlewares=[self._guard])
        app.router.add_get("/", self._index)
        app.router.add_get("/plotly.min.js", self._plotly)
        app.router.add_get("/api/state", self._state)
        app.router.add_get("/favicon.ico", self._favicon)
        app.router.add_post("/api/stop", self._stop_run)
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
        self._page = render_page(self.settings.title, self.stop_token).encode()  # built before the run, not during it
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
        """Mark the run finished, close the server and join its thread (bounded).

        With a verdict and a page that was watching, first wait (at most ``linger_s``) until the
        page has fetched the verdict, so it stays on screen instead of "disconnected".
        """
        self.finished = True
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if self.verdict is not None and self._watching():
            deadline = time.monotonic() + self.settings.linger_s
            while not self.verdict_seen.is_set() and time.monotonic() < deadline:
                if self._watching() <= self._told:
                    break
                self.verdict_seen.wait(0.1)

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


def _level(target: str) -> float | None:
    """``"12.5 req/s"`` → 12.5; None for a closed loop's users or anything else."""
    number, _, unit = target.partition(" ")
    if unit.strip() != "req/s":
        return None
    try:
        return float(number)
    except ValueError:
        return None
