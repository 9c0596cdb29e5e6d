"""The monitor's schedule: rounds at start + k × every plus a bounded jitter, a stop ends the wait."""

from __future__ import annotations

import asyncio
import time

import surgelab.providers.monitor as monitor_module
from surgelab.providers.monitor import MonitorSettings, monitor


def test_rounds_keep_to_the_schedule_and_a_slow_round_shifts_nothing(monkeypatch) -> None:
    starts: list[float] = []

    async def slow_round(*_args, **_kwargs):
        starts.append(time.monotonic())
        await asyncio.sleep(0.08)  # a round that takes most of the interval
        return []

    monkeypatch.setattr(monitor_module, "run_round", slow_round)
    t0 = time.monotonic()
    done = asyncio.run(monitor(None, None, MonitorSettings(every=0.2, jitter=0.05, rounds=4, seed=3)))  # type: ignore[arg-type]
    assert done == 4
    for k, started in enumerate(starts):
        offset = started - t0
        assert k * 0.2 <= offset < k * 0.2 + 0.05 + 0.15, (k, offset)


def test_a_stop_ends_the_wait_for_the_next_round(monkeypatch) -> None:
    async def quick_round(*_args, **_kwargs):
        return []

    monkeypatch.setattr(monitor_module, "run_round", quick_round)

    async def main() -> int:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(0.2, stop.set)
        return await monitor(None, None, MonitorSettings(every=3600, jitter=0), stop=stop)  # type: ignore[arg-type]

    started = time.monotonic()
    assert asyncio.run(main()) == 1 and time.monotonic() - started < 5
