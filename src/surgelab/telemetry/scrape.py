"""Poll Prometheus endpoints during a run without ever disturbing the load.

Each source is fetched on its own session with a short timeout, parsed off the event loop,
and filtered to its preset's series (or the ones named). A source that is down, slow or
answers garbage costs a failed scrape, recorded as ``up = 0`` with the reason; the run goes on.

An https:// source is trusted as the load path trusts its target (``client/network.py``): a
source on a target's host takes that target's ``tls`` and ``proxy``, unless it declares its own
``tls``; any other source has the system's trust and the environment's proxies (``NO_PROXY`` …).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from surgelab._compat import timeout
from surgelab.client.network import request_options, tls_failure
from surgelab.metrics.store import PartStore
from surgelab.scenario.output import Telemetry
from surgelab.scenario.target import Target, Tls
from surgelab.telemetry.presets import PRESETS, detect_preset
from surgelab.telemetry.samples import Family, SampleBuffer, label_text, parse_exposition

__all__ = ["ScrapeSource", "Scraper", "scrape_sources"]

_MAX_BODY = 16 * 1024 * 1024
_FLUSH_EVERY = 5  # scrapes between writes to disk


@dataclass(frozen=True)
class ScrapeSource:
    name: str
    url: str
    preset: str = "auto"  # a preset name, "auto" (detect from the metric names) or "all"
    series: tuple[str, ...] = ()  # extra families to keep; "*" keeps everything
    timeout: float = 2.0
    tls: Tls = field(default_factory=Tls)
    proxy: str = "env"  # as target.proxy: env, none, or a proxy URL

    @property
    def options(self) -> dict[str, Any]:
        """aiohttp's keywords for this source: its TLS context and name, its proxy."""
        return request_options(self.url, self.tls, self.proxy)


def scrape_sources(telemetry: Telemetry, targets: Sequence[Target]) -> list[ScrapeSource]:
    """The scenario's sources, each with the TLS and proxy it is fetched with: a source's own ``tls``,
    else that of the target on the same host (its proxy too), else the system's trust."""
    out = []
    for s in telemetry.sources:
        host = urlsplit(str(s.url)).hostname
        same = next((t for t in targets if urlsplit(t.base_url).hostname == host), None)
        tls = s.tls or (same.tls if same is not None else Tls())
        proxy = same.proxy if same is not None else "env"
        out.append(ScrapeSource(s.label, str(s.url), s.preset, tuple(s.series), s.timeout, tls, proxy))
    return out


class _Filter:
    """Which families of a source are kept: its preset's, plus any named."""

    def __init__(self, source: ScrapeSource) -> None:
        self.source = source
        self.keep_all = source.preset == "all" or "*" in source.series
        self.names: set[str] | None = None
        self.patterns = [re.compile(s.replace("*", ".*") + "$") for s in source.series if "*" in s and s != "*"]
        if source.preset not in ("auto", "all"):
            self.names = set(PRESETS[source.preset].kept) | set(source.series)

    def keeps(self, families: list[Family]) -> list[Family]:
        if self.keep_all:
            return families
        if self.names is None:  # first successful scrape of an "auto" source decides
            preset = detect_preset({f.name for f in families})
            self.names = set(preset.kept if preset else ()) | set(self.source.series)
        names = self.names
        return [
            f for f in families
            if f.name in names or f"{f.name}_total" in names or any(p.match(f.name) for p in self.patterns)
        ]  # fmt: skip


async def _read_body(response: aiohttp.ClientResponse) -> bytes | None:
    """The whole body, however many pieces it arrives in (``read(n)`` alone returns only what is
    already buffered); None when it exceeds ``_MAX_BODY``."""
    body = bytearray()
    while chunk := await response.content.read(_MAX_BODY + 1 - len(body)):
        body += chunk
        if len(body) > _MAX_BODY:
            return None
    return bytes(body)


class Scraper:
    def __init__(
        self, sources: list[ScrapeSource], interval: float, clock: Callable[[], int], store: PartStore,
        local: Sequence[Callable[[int, SampleBuffer], None]] = (),
    ) -> None:  # fmt: skip
        self.sources = sources
        self.local = tuple(local)  # samplers of this machine (NVML), called in a thread
        self.interval = interval
        self.clock = clock
        self.store = store
        self.buffer = SampleBuffer()
        self._filters = {s.name: _Filter(s) for s in sources}
        self._last_after: int | None = None  # set by ``finish``: one more scrape starting after this, then stop
        self._wake = asyncio.Event()

    async def finish(self, task: asyncio.Task[None]) -> None:
        """The run's last answer is in: one more scrape, so the server's counters cover the whole run (they
        missed the answers after the last periodic scrape: vLLM's TTFT histogram counted 60 of 66), then stop;
        bounded by the slowest source's timeout, cancelled past it."""
        self._last_after = self.clock()
        self._wake.set()
        done, _ = await asyncio.wait([task], timeout=max(s.timeout for s in self.sources) + 1.0 if self.sources else 1.0)
        if not done:
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    async def run(self) -> None:
        """Scrape every ``interval`` until cancelled or ``finish``ed; writes whatever it has when it stops."""
        timeout = aiohttp.ClientTimeout(total=None)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            scrapes = 0
            next_at = self.clock()
            flush: asyncio.Future[None] | None = None
            try:
                while True:
                    started = self.clock()
                    await asyncio.gather(
                        *(self._scrape(session, s) for s in self.sources),
                        *(asyncio.to_thread(sample, self.clock(), self.buffer) for sample in self.local),
                    )
                    scrapes += 1
                    if self._last_after is not None and started >= self._last_after:
                        break  # the scrape after the run's last answer
                    if scrapes % _FLUSH_EVERY == 0:
                        flush = asyncio.ensure_future(asyncio.to_thread(self.store.write, self.buffer.take()))
                        await asyncio.shield(flush)
                    next_at += int(self.interval * 1e9)
                    with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), max(next_at - self.clock(), 0) / 1e9)
            finally:
                if flush is not None:  # a cancelled run ends while its thread may still write: wait for it,
                    await asyncio.wait([flush])  # or the run's merge would miss those rows
                self.store.write(self.buffer.take())

    async def _scrape(self, session: aiohttp.ClientSession, source: ScrapeSource) -> None:
        started = self.clock()
        add = self.buffer.add
        error = None
        try:
            async with timeout(source.timeout), session.get(source.url, **source.options) as response:
                body = await _read_body(response)
                if response.status != 200:
                    error = f"HTTP {response.status}"
                elif body is None:
                    error = f"body larger than {_MAX_BODY // (1024 * 1024)} MiB"
            if error is None and body is not None:
                families = await asyncio.to_thread(parse_exposition, body.decode("utf-8", "replace"))
                for family in self._filters[source.name].keeps(families):
                    for name, labels, value in family.samples:
                        add(started, source.name, name, label_text(labels), value, family.kind)
        except (TimeoutError, asyncio.TimeoutError):
            error = f"timeout after {source.timeout:g}s"
        except (aiohttp.ClientError, OSError) as exc:
            error = (tls_failure(exc) or f"{type(exc).__name__}: {exc}")[:200]
        except ValueError as exc:
            error = str(exc)[:200]
        duration = (self.clock() - started) / 1e9
        add(started, source.name, "up", label_text({"error": error}) if error else "", 0.0 if error else 1.0, "gauge")
        add(started, source.name, "scrape_duration_seconds", "", duration, "gauge")
