"""The target's own gauges for the dashboard's pipeline: running, waiting, KV-cache usage.

When the run scrapes Prometheus endpoints (``--scrape``, ``telemetry.sources``), the dashboard
reads the same endpoints once a second on its own thread — never on the run's event loop —
and keeps the role gauges the telemetry presets name (vLLM, SGLang, TGI, …). Only the lines of
those few families are parsed, so a large exposition costs little interpreter time. Each source
is fetched with the TLS and proxy the run's scraper uses for it (``ScrapeSource.options``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence

import aiohttp

from surgelab.telemetry.presets import PRESETS
from surgelab.telemetry.samples import parse_exposition
from surgelab.telemetry.scrape import ScrapeSource

__all__ = ["ROLES", "gauges_from_text", "poll_gauges"]

ROLES = ("running", "waiting", "kv_usage")


def _families() -> dict[str, str]:
    """Family name → role, over every preset."""
    out: dict[str, str] = {}
    for preset in PRESETS.values():
        for role, names in preset.roles.items():
            if role in ROLES:
                for name in names.split("|"):
                    out[name] = role
    return out


_FAMILIES = _families()


def gauges_from_text(text: str) -> dict[str, float]:
    """Role gauges of one exposition: counts summed over series, KV usage the largest (a fraction)."""
    wanted = [line for line in text.splitlines() if line.split("{", 1)[0].split(" ", 1)[0] in _FAMILIES]
    if not wanted:
        return {}
    out: dict[str, float] = {}
    for family in parse_exposition("\n".join(wanted) + "\n"):
        role = _FAMILIES.get(family.name)
        if role is None:
            continue
        for _, _, value in family.samples:
            _add(out, role, value)
    return out


def _add(into: dict[str, float], role: str, value: float) -> None:
    """Counts add up over series and sources; KV usage is the fullest cache."""
    into[role] = max(into.get(role, 0.0), value) if role == "kv_usage" else into.get(role, 0.0) + value


async def poll_gauges(
    sources: Sequence[ScrapeSource], sink: Callable[[dict[str, float]], None], interval: float = 1.0
) -> None:
    """Scrape ``sources`` every ``interval`` seconds until cancelled; each round's gauges go to ``sink``."""
    timeout = aiohttp.ClientTimeout(total=min(interval * 2, 5.0))
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while True:
            merged: dict[str, float] = {}
            for source in sources:
                with contextlib.suppress(aiohttp.ClientError, OSError, asyncio.TimeoutError, ValueError):
                    async with session.get(source.url, **source.options) as response:
                        if response.status == 200:
                            for role, value in gauges_from_text(await response.text()).items():
                                _add(merged, role, value)
            if merged:
                sink(merged)
            await asyncio.sleep(interval)
