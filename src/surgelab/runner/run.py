"""Run one scenario against its target: plan the phases, send, record, stop cleanly, summarise.

Every scheduled request is recorded exactly once, in one final state; the run directory is
written as it goes, so an interruption keeps what was measured.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from surgelab.analysis.finish import finish_summary
from surgelab.load.inputs import input_report
from surgelab.load.phases import PhasePlan, open_loop_offsets, plan_phases
from surgelab.load.ramp_check import ramp_warnings
from surgelab.load.stops import breakpoints
from surgelab.metrics.live import LiveSnapshot, LiveStats
from surgelab.metrics.rundir import prepare_run_dir, run_info, write_run_info
from surgelab.metrics.store import PartStore
from surgelab.runner.closed_loop import run_closed_loop
from surgelab.runner.cpu import CpuWatch
from surgelab.runner.execution import Execution, Shard
from surgelab.runner.headroom import client_headroom, unrecorded_headroom
from surgelab.runner.interrupts import Interrupts
from surgelab.runner.monitors import watch_breakpoint, watch_thresholds
from surgelab.runner.open_loop import run_open_loop
from surgelab.runner.preflight import ready
from surgelab.runner.protocols import Observer, RecordSink
from surgelab.scenario.model import Scenario
from surgelab.telemetry.nvml import open_nvml
from surgelab.telemetry.samples import TELEMETRY_SCHEMA
from surgelab.telemetry.scrape import Scraper, scrape_sources
from surgelab.units import SECOND
from surgelab.workload.context import context_warnings

__all__ = [
    "RunResult", "run_scenario", "run_shard", "prepare", "finish", "write_summary", "with_salt", "telemetry_scraper",
    "open_loop_offsets",
]  # fmt: skip


@dataclass
class RunResult:
    run_dir: Path
    summary: dict[str, Any]
    stop_reason: str

    @property
    def thresholds_passed(self) -> bool:
        return bool(self.summary.get("thresholds_passed", True))


def _target_text(plans: list[PhasePlan]) -> Callable[[float], str]:
    """What the live view shows as the planned load at a moment of the run."""

    def at(t_s: float) -> str:
        t_ns = int(t_s * SECOND)
        parts = []
        for plan in plans:
            if plan.start_ns <= t_ns < plan.end_ns:
                unit = "req/s" if plan.phase.load.mode == "open" else "users"
                name = f"{plan.phase.name}: " if len(plans) > 1 else ""
                parts.append(f"{name}{plan.level_at(t_ns):.3g} {unit}")
        return ", ".join(parts) or "–"

    return at


async def _run_phase(ex: Execution, plan: PhasePlan) -> None:
    if not await ex.sleep_until(plan.start_ns):
        return
    if plan.phase.load.mode == "open":
        await run_open_loop(ex, plan)
    else:
        await run_closed_loop(ex, plan)


async def _execute(
    ex: Execution, plans: list[PhasePlan], handle_signals: bool, stop_event: asyncio.Event | None, scraper: Scraper | None,
    hurry_event: asyncio.Event | None = None,
) -> None:  # fmt: skip
    interrupts = Interrupts(ex.scenario, ex.request_stop, lambda: ex.hurry("interrupted"), enabled=handle_signals,
                            observers=ex.observers)  # fmt: skip

    async def watch_event() -> None:
        assert stop_event is not None
        await stop_event.wait()
        ex.request_stop("stopped")

    async def watch_hurry() -> None:
        assert hurry_event is not None
        await hurry_event.wait()
        ex.hurry("stopped")

    scraping = asyncio.create_task(scraper.run()) if scraper is not None else None
    helpers = [
        asyncio.create_task(ex.flush_loop()),
        asyncio.create_task(watch_thresholds(ex, min(p.warmup_end_ns for p in plans))),
        *(asyncio.create_task(watch_breakpoint(ex, p)) for p in breakpoints(plans)),
        *([asyncio.create_task(watch_event())] if stop_event is not None else []),
        *([asyncio.create_task(watch_hurry())] if hurry_event is not None else []),
    ]
    grace = max(p.phase.load.grace for p in plans)
    try:
        with interrupts:
            async with ex:
                starters = [ex.spawn(_run_phase(ex, plan)) for plan in plans]
                for plan, outcome in zip(plans, await asyncio.gather(*starters, return_exceptions=True)):
                    if isinstance(outcome, Exception):  # a bug, not a load condition: say so, keep what was measured
                        print(f"error: phase {plan.phase.name!r} failed: {outcome!r}", file=sys.stderr)
                        ex.request_stop(f"error in phase {plan.phase.name!r}: {type(outcome).__name__}: {outcome}")
                await ex.drain(grace, max(p.end_ns for p in plans))
    finally:
        if scraper is not None and scraping is not None:
            await scraper.finish(scraping)
        for task in helpers:
            task.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)
        await ex.final_flush()
        ex.tick()


def telemetry_scraper(scenario: Scenario, run_dir: Path, clock: Callable[[], int]) -> Scraper | None:
    config = scenario.telemetry
    local = []
    if config.nvml:
        sampler, note = open_nvml()
        print(f"telemetry: {note}", file=sys.stderr)
        local = [sampler] if sampler is not None else []
    if not config.sources and not local:
        return None
    sources = scrape_sources(config, [scenario.target, *(scenario.targets or [])])
    store = PartStore(run_dir, "telemetry", TELEMETRY_SCHEMA, "seq")
    return Scraper(sources, config.interval, clock, store, local)


def with_salt(scenario: Scenario) -> Scenario:
    """The scenario with its prompt salt fixed (a fresh random one unless the scenario sets it)."""
    if scenario.prompt_salt is not None:
        return scenario
    return scenario.model_copy(update={"prompt_salt": secrets.randbelow(1 << 31)})


def prepare(scenario: Scenario, run_dir: Path, workers: int = 1) -> tuple[Path, list[PhasePlan], dict[str, Any]]:
    """Create the run directory and write ``run.json`` with the plan; the same for every worker layout.

    The scenario must already carry its prompt salt (``with_salt``), so that every process of
    the run and the saved ``scenario.yaml`` agree on the prompts. ``run.json`` records the
    context the summary reports: this machine's calibrated client headroom for ``workers``
    processes (and, from ``finish``, the run's CPU use).
    """
    inputs = input_report(scenario)  # the files' skipped rows, reported with the summary
    run_dir = prepare_run_dir(run_dir, scenario)
    plans = plan_phases(scenario)
    info = run_info(plans)
    info["client"] = client_headroom(scenario, workers)
    info["inputs"] = inputs
    write_run_info(run_dir, info)
    return run_dir, plans, info


def pool_size(plans: list[PhasePlan]) -> int:
    """Connections the whole run may need at once."""
    return sum(p.phase.load.max_in_flight if p.phase.load.mode == "open" else math.ceil(p.phase.load.shape.peak) for p in plans)


def finish(
    scenario: Scenario,
    run_dir: Path,
    info: dict[str, Any],
    stop_reason: str,
    stop_at_ns: int | None,
    wall_ns: int,
    cpu: CpuWatch | None = None,
) -> RunResult:
    """Record how the run ended (and, from ``cpu``, its CPU use), merge what every writer left,
    summarise, and write ``summary.json``."""
    run_end_ns = int(info["planned_duration_s"] * SECOND)
    stopped_at = min(stop_at_ns, run_end_ns) if stop_at_ns is not None else run_end_ns
    info.update(stop_reason=stop_reason, stopped_at_s=stopped_at / SECOND, wall_s=wall_ns / SECOND)
    if cpu is not None:
        info["cpu"] = cpu.usage()
    write_run_info(run_dir, info)
    return RunResult(run_dir=run_dir, summary=write_summary(scenario, run_dir, info), stop_reason=stop_reason)


def write_summary(scenario: Scenario, run_dir: Path, info: dict[str, Any]) -> dict[str, Any]:
    """``summary.json`` from what is on disk (``analysis.finish``), at the end of every run and by
    ``surgelab summarize`` after a crash. The run's context (CPU use, client headroom, routing) is
    what ``run.json`` recorded during the run, wherever this runs."""
    if "client" not in info and not info.get("simulated"):  # a run directory written before run.json recorded it
        info = {**info, "client": unrecorded_headroom(scenario, int(info.get("workers", 1)))}
    return finish_summary(scenario, run_dir, info)


async def run_shard(
    scenario: Scenario,
    run_dir: Path,
    plans: list[PhasePlan],
    *,
    shard: Shard = Shard(),
    t0: int | None = None,
    api_key: str | None = None,
    on_tick: Callable[[LiveSnapshot], None] | None = None,
    on_stop: Callable[[str], None] | None = None,
    stop_event: asyncio.Event | None = None,
    hurry_event: asyncio.Event | None = None,
    handle_signals: bool = False,
    observers: Sequence[Observer] = (),
    scraper_wanted: bool = True,
    keep_text: bool = False,
    store: RecordSink | None = None,
) -> tuple[Execution, Scraper | None]:
    """Send this process's share of the run; records go to its own part files (or to ``store``)."""
    live = LiveStats(max(p.end_ns for p in plans) / SECOND, _target_text(plans))
    ex = Execution(
        scenario, run_dir, api_key, live, on_tick, pool_size=pool_size(plans), observers=observers, shard=shard, t0=t0,
        on_stop=on_stop, keep_text=keep_text, store=store,
    )  # fmt: skip
    scraper = telemetry_scraper(scenario, run_dir, ex.clock) if scraper_wanted else None
    await _execute(ex, plans, handle_signals, stop_event, scraper, hurry_event)
    return ex, scraper


async def run_scenario(
    scenario: Scenario,
    run_dir: Path,
    *,
    api_key: str | None = None,
    on_tick: Callable[[LiveSnapshot], None] | None = None,
    stop_event: asyncio.Event | None = None,
    hurry_event: asyncio.Event | None = None,
    handle_signals: bool = False,
    observers: Sequence[Observer] = (),
    keep_text: bool = False,
) -> RunResult:
    """Run ``scenario`` in this process and leave records, summary and resolved scenario in ``run_dir``."""
    for warning in ramp_warnings(scenario) + context_warnings(scenario):  # said before the load, and kept in summary.json's warnings
        print(f"warning: {warning}", file=sys.stderr)
    scenario = await ready(with_salt(scenario), api_key)
    with CpuWatch() as cpu:
        run_dir, plans, info = prepare(scenario, run_dir)
        ex, _ = await run_shard(
            scenario, run_dir, plans, api_key=api_key, on_tick=on_tick, stop_event=stop_event, hurry_event=hurry_event,
            handle_signals=handle_signals, observers=observers, keep_text=keep_text,
        )  # fmt: skip
        if ex.router is not None:
            info["routing"] = ex.router.report()
        note_crashes(info, ex.crashes)
        return finish(scenario, run_dir, info, ex.stop.reason, ex.stop.at_ns, ex.clock(), cpu)


def note_crashes(info: dict[str, Any], crashes: Sequence[str]) -> None:
    """run.json's ``client_crashes``: how many request tasks raised, and the first (the run is invalid)."""
    if crashes:
        info["client_crashes"] = {"count": len(crashes), "first": crashes[0]}
