"""Scraping that loses nothing: a /metrics body that arrives in pieces is read whole (vLLM's,
~50 KB, often does under load), and a flush under way when the run ends is finished first."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import aiohttp
from aiohttp import web

from surgelab.telemetry.samples import parse_exposition
from surgelab.telemetry.scrape import Scraper, ScrapeSource

REAL_VLLM = (Path(__file__).parent / "fixtures" / "vllm-0.32.prom").read_bytes()


async def _scrape_once(path: str) -> list[tuple[str, str, float]]:
    async def pieces(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/plain; version=0.0.4"})
        await response.prepare(request)
        cut = len(REAL_VLLM) // 3
        for part in (REAL_VLLM[:cut], REAL_VLLM[cut : 2 * cut], REAL_VLLM[2 * cut :]):
            await response.write(part)
            await asyncio.sleep(0.05)  # the next piece is not there yet when the client reads
        await response.write_eof()
        return response

    async def too_big(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        for _ in range(5):
            await response.write(REAL_VLLM)
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_get("/pieces", pieces)
    app.router.add_get("/big", too_big)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        source = ScrapeSource("s", f"http://127.0.0.1:{port}{path}", "all", timeout=5.0)
        scraper = Scraper([source], 1.0, time.perf_counter_ns, store=None)  # type: ignore[arg-type]
        async with aiohttp.ClientSession() as session:
            await scraper._scrape(session, source)
        rows = scraper.buffer.take().to_pylist()
        return [(r["metric"], r["labels"], r["value"]) for r in rows]
    finally:
        await runner.cleanup()


def test_a_body_in_pieces_is_read_to_its_end() -> None:
    rows = asyncio.run(_scrape_once("/pieces"))
    up = [(labels, v) for m, labels, v in rows if m == "up"]
    assert up == [("", 1.0)], up
    expected = sum(len(f.samples) for f in parse_exposition(REAL_VLLM.decode()))
    assert len([r for r in rows if r[0] not in ("up", "scrape_duration_seconds")]) == expected


def test_a_body_over_the_cap_is_a_failed_scrape(monkeypatch) -> None:
    import surgelab.telemetry.scrape as scrape

    monkeypatch.setattr(scrape, "_MAX_BODY", 2 * len(REAL_VLLM))
    rows = asyncio.run(_scrape_once("/big"))
    assert [v for m, _, v in rows if m == "up"] == [0.0]
    assert any("larger than" in labels for m, labels, _ in rows if m == "up")
    assert not [r for r in rows if r[0] not in ("up", "scrape_duration_seconds")]


class _SlowStore:
    """A part store whose writes take a while, as a parquet write of many samples can."""

    def __init__(self) -> None:
        self.rows = 0
        self.writing = threading.Event()

    def write(self, table) -> None:
        if table.num_rows:
            self.writing.set()
            time.sleep(0.3)
            self.rows += table.num_rows


def test_a_flush_under_way_when_the_run_ends_is_not_lost() -> None:
    async def main() -> tuple[int, int]:
        async def metrics(request: web.Request) -> web.Response:
            return web.Response(body=REAL_VLLM, content_type="text/plain")

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            store = _SlowStore()
            source = ScrapeSource("s", f"http://127.0.0.1:{port}/metrics", "vllm")
            scraper = Scraper([source], 0.01, time.perf_counter_ns, store)  # type: ignore[arg-type]
            task = asyncio.create_task(scraper.run())
            while not store.writing.is_set():  # the periodic flush (every 5 scrapes) has begun
                await asyncio.sleep(0.005)
            task.cancel()  # the run ends now
            await asyncio.gather(task, return_exceptions=True)
            return store.rows, scraper.buffer.seq  # written by the time run() returned; rows scraped
        finally:
            await runner.cleanup()

    written, scraped = asyncio.run(main())
    assert scraped > 0 and written == scraped
