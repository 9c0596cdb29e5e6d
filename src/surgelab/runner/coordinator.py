"""One run split over shards in other processes — worker processes or Ray actors — driven from here.

Both layouts leave the same work to this process, and this is where it is done once: the run
directory and ``run.json`` with the plan; Ctrl-C and SIGTERM; the one stop of the run (its first
reason and when — a shard's abort or breakpoint, a dead shard under ``guards.worker_loss: stop``,
an interrupt), passed on to every shard; the telemetry scraper; the live view merged from the
shards' snapshots; the observers, fed those snapshots and every record as it lands in the run
directory; and the end: what dead shards took with them, then the summary. A layout
(``runner.workers``, ``runner.ray_backend``) starts its shards, tells them how to stop and
reports what they say.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from surgelab.metrics.live import LiveSnapshot, merge_snapshots
from surgelab.runner.cpu import CpuWatch
from surgelab.runner.feed import PartsFeed
from surgelab.runner.interrupts import Interrupts
from surgelab.runner.losses import WorkerLoss, account_losses
from surgelab.runner.protocols import Observer
from surgelab.runner.run import RunResult, finish, note_crashes, prepare, telemetry_scraper
from surgelab.scenario.model import Scenario
from surgelab.telemetry.scrape import Scraper
from surgelab.units import SECOND

__all__ = ["Coordinator", "TICK_S"]

TICK_S = 0.5  # how often the live view and the observers are brought up to date


class Coordinator:
    """The driver's side of one sharded run; ``scenario`` already carries its salt and passed pre-flight."""

    def __init__(
        self,
        scenario: Scenario,
        run_dir: Path,
        workers: int,
        *,
        on_tick: Callable[[LiveSnapshot], None] | None = None,
        observers: Sequence[Observer] = (),
    ) -> None:
        self.scenario, self.workers = scenario, workers
        self.run_dir, self.plans, self.info = prepare(scenario, run_dir, workers)
        self.info["workers"] = workers
        self.on_tick, self.observers = on_tick, tuple(observers)
        self.t0 = time.perf_counter_ns()  # until the shards' agreed start (a stop before it is at 0)
        self.reason: str | None = None
        self.stop_at: int | None = None
        self.losses: list[WorkerLoss] = []
        self._feed = PartsFeed(self.run_dir, self.observers)
        self._stop_shards: Callable[[], None] = lambda: None
        self._hurry_shards: Callable[[], None] = lambda: None
        self._scraping: asyncio.Task | None = None
        self._scraper: Scraper | None = None
        self._driver_cpu = time.process_time()
        self._last_tick = 0.0

    def clock(self) -> int:
        """Nanoseconds since the shards' agreed start."""
        return time.perf_counter_ns() - self.t0

    @contextmanager
    def control(
        self, stop: Callable[[], None], hurry: Callable[[], None], handle_signals: bool = False
    ) -> Iterator[Coordinator]:
        """While the shards run: how to tell them all to stop and to drop their grace; interrupts do either."""
        self._stop_shards, self._hurry_shards = stop, hurry
        with Interrupts(self.scenario, self.request_stop, hurry, enabled=handle_signals, observers=self.observers):
            yield self

    def request_stop(self, why: str) -> None:
        """Stop every shard; the first reason, and when it came, is the run's."""
        if self.reason is None:
            self.reason, self.stop_at = why, max(self.clock(), 0)
        self._stop_shards()

    def lose(self, loss: WorkerLoss) -> None:
        """A shard died: its losses are accounted at the end; under ``worker_loss: stop`` the run stops."""
        self.losses.append(loss)
        if self.scenario.guards.worker_loss == "stop":
            self.request_stop(f"stopped: worker {loss.worker} died at {loss.died_at_ns / SECOND:.1f} s")

    def start(self, t0: int) -> None:
        """The shards start sending at ``t0`` (this process's monotonic clock): the scraper starts with them."""
        self.t0 = t0
        self._driver_cpu = time.process_time()  # from the start, as the shards count theirs
        self._scraper = telemetry_scraper(self.scenario, self.run_dir, self.clock)
        self._scraping = asyncio.create_task(self._scraper.run()) if self._scraper is not None else None

    def tick(self, snapshots: Sequence[LiveSnapshot], force: bool = False) -> None:
        """At most every ``TICK_S`` (or now, ``force``: the shards' last figures): the records that
        landed to the observers, then the merged snapshot to all."""
        if not snapshots or (not force and time.monotonic() - self._last_tick < TICK_S):
            return
        self._last_tick = time.monotonic()
        self._feed.poll()
        snapshot = merge_snapshots(snapshots)
        if self.on_tick is not None:
            self.on_tick(snapshot)
        for observer in self.observers:
            observer.update(snapshot)

    async def stop_helpers(self) -> None:
        """The shards have ended: one last scrape, then stop scraping."""
        if self._scraper is not None and self._scraping is not None:
            await self._scraper.finish(self._scraping)

    def end(self, results: Sequence[dict[str, Any]], wall_ns: int, cpu: CpuWatch) -> RunResult:
        """Why and when the run stopped, from the stop and every shard's own (``reason``, ``at_ns``);
        what the dead shards took with them; every record to the observers; the summary."""
        reasons = [r["reason"] for r in results if r["reason"] != "completed"]
        reason = self.reason or (reasons[0] if reasons else "completed")
        stops = [t for t in (self.stop_at, *(r["at_ns"] for r in results)) if t is not None]
        stop_at = min(stops) if stops else None  # the deciding shard stopped first; this process heard a moment later
        self.info["driver_cpu_s"] = time.process_time() - self._driver_cpu  # this process's; the shards' beside it
        if self.losses:
            reason = account_losses(
                self.scenario, self.plans, self.run_dir, self.info, self.losses, self.workers, reason, stop_at
            )
        self._feed.poll()
        note_crashes(self.info, [c for r in results for c in r.get("crashes", ())])
        return finish(self.scenario, self.run_dir, self.info, reason, stop_at, wall_ns, cpu)
