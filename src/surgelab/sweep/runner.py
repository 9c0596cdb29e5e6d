"""Run a sweep: warm up, climb level by level, refine around the knee, optionally break.

Every level is an ordinary run (``SWEEP_DIR/level-NN/``) of the scenario's target and
workload with the level's load, so each can be summarised, compared and reported with the
tools that read any run. The sweep itself only decides the next level and when to stop.
With a ``fleet`` the levels run on that simulated fleet in virtual time instead of against
the target: the same directories, sweep.json, knee and SLA capacity, without a server.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from surgelab.analysis.knee import find_knee
from surgelab.analysis.stats import min_count, sparse_percentile
from surgelab.engine.accuracy import ErrorBar
from surgelab.metrics.store import read_records
from surgelab.redact import redact_url
from surgelab.runner import run_scenario
from surgelab.runner.preflight import ready
from surgelab.scenario.loader import ScenarioError, build_scenario
from surgelab.scenario.model import Scenario
from surgelab.scenario.shapes import SHAPES
from surgelab.sim import Fleet, fleet_error_bar, simulate
from surgelab.sweep.breaking import analyse_break, break_shape
from surgelab.sweep.capacity import sla_capacity, slo_thresholds, stop_reason
from surgelab.sweep.config import SweepConfig
from surgelab.sweep.levels import ladder, refinement
from surgelab.sweep.result import LevelRow, SweepResult, completion_rate, row_from_summary, write_sweep

__all__ = ["run_sweep", "level_scenario", "SweepError"]


class SweepError(ValueError):
    """A scenario the sweep cannot drive; one line for the CLI."""


def level_scenario(
    base: Scenario, config: SweepConfig, load: Any, duration: float, warmup: float, name: str
) -> Scenario:
    """The base scenario with its load replaced; its thresholds are dropped (the sweep's stop rules decide)."""
    if base.load is None:
        raise SweepError("a sweep needs a scenario with a single load (not phases)")
    data = base.model_dump(mode="json", by_alias=True, exclude_none=True)
    old = data["load"]
    new: dict[str, Any] = {"duration": duration, "warmup": warmup, "grace": old["grace"]}
    if config.mode == "rate":
        new.update(rate=load, arrival=old["arrival"], cv=old["cv"], max_in_flight=old["max_in_flight"])
    else:
        constant = SHAPES.of(load).constant  # the breaking phase is a shape: it sets when its users start
        new.update(concurrency=load, think_time=old.get("think_time", 0.0), ramp_up=config.ramp_up if constant else 0.0)
    data.update(load=new, name=name, thresholds=[])
    data.pop("output", None)
    try:
        level = build_scenario(data, source=f"sweep level {name}")
        return level.mark_preflight_done() if base.preflight_done else level  # checked once, before the first level
    except ScenarioError as exc:  # e.g. a level above the scenario's guards: stop with what was measured
        raise SweepError(str(exc).splitlines()[0]) from None


async def _run(
    scenario: Scenario, run_dir: Path, stop_event: asyncio.Event | None, signals: bool, observers: Sequence[Any] = ()
) -> dict[str, Any]:
    key = os.environ.get(scenario.target.api_key_env) if scenario.target.api_key_env else None
    result = await run_scenario(
        scenario, run_dir, api_key=key, stop_event=stop_event, handle_signals=signals, observers=observers
    )
    return {"summary": result.summary, "stop_reason": result.stop_reason}


LevelRunner = Callable[[Scenario, Path, "asyncio.Event | None", bool, Sequence[Any]], Awaitable[dict[str, Any]]]


def _simulated(fleet: Fleet) -> LevelRunner:
    """A level runner that simulates each level on ``fleet`` in virtual time."""

    async def run(scenario: Scenario, run_dir: Path, _stop: asyncio.Event | None, _signals: bool,
                  _observers: Sequence[Any] = ()) -> dict[str, Any]:  # fmt: skip
        result = simulate(scenario, fleet, run_dir)
        return {"summary": result.summary, "stop_reason": result.stop_reason}

    return run


def _summarise_knee(rows: list[LevelRow], unit: str) -> dict[str, Any]:
    ordered = sorted(rows, key=lambda r: r.offered)
    # a level's P99 from too few requests is its slowest one or two: left out of the latency knee
    thin = [r.offered for r in ordered if sparse_percentile(r.measured, 99)]
    lat = [None if sparse_percentile(r.measured, 99) else r.latency("ttft", "p99") for r in ordered]
    latency = [float("nan") if v is None else v for v in lat] if any(v is not None for v in lat) else None
    knee = find_knee(
        [r.offered for r in ordered], [r.requests_per_s for r in ordered], latency, unit=unit, latency_name="p99 TTFT"
    )
    out = knee.to_dict()
    out["sparse_levels"] = thin
    if thin:
        out["reason"] += (f"; P99 TTFT of {len(thin)} level(s) with fewer than {min_count(99)} requests left out"
                          f" ({', '.join(f'{v:g}' for v in thin)}): hold levels longer for a latency knee")  # fmt: skip
    out["row_index"] = ordered[knee.index].index if knee.index is not None else None
    return out


async def run_sweep(
    base: Scenario,
    config: SweepConfig,
    sweep_dir: Path,
    *,
    on_level: Callable[[LevelRow], None] | None = None,
    on_status: Callable[[str], None] | None = None,
    handle_signals: bool = False,
    observers: Sequence[Any] = (),
    fleet: Fleet | None = None,
    served_error: ErrorBar | None = None,
) -> SweepResult:
    """Run the whole sweep and write ``sweep.json``/``sweep.parquet`` in ``sweep_dir``.

    ``fleet``: simulate every level on it instead of sending to the target. ``served_error``:
    the target is the embedded server on a physics profile, whose figures are the engine
    model's: its measured error goes into ``sweep.json`` as a simulated fleet's does.
    """
    say = on_status or (lambda _msg: None)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    run_level: LevelRunner = _run if fleet is None else _simulated(fleet)
    if fleet is None:  # checked and learned once, with the scenario's key: every level sends prompts made the same way
        base = await ready(base, os.environ.get(base.target.api_key_env) if base.target.api_key_env else None)
    slos = slo_thresholds(base.slo, config.sla_percentile)
    p99_bounds = slo_thresholds(base.slo, "p99")
    rows: list[LevelRow] = []
    target: dict[str, Any] = {"url": redact_url(base.target.base_url), "model": base.target.model, "endpoint": base.target.endpoint}
    if fleet is not None:
        target = {"simulated_fleet": fleet.name, "model": base.target.model, "endpoint": base.target.endpoint}
    bar = fleet_error_bar(fleet) if fleet is not None else served_error
    if bar is not None:  # the capacity the levels find is the engine model's: say how sure it is
        target["model_error"] = bar.to_dict()
    result = SweepResult(
        name=base.name, mode=config.mode, unit=config.unit,
        target=target,
        config=config.model_dump(mode="json"), slo=[s.expr for s in slos], levels=rows, stop_reason="",
    )  # fmt: skip
    plan = ladder(config)
    settle_hold = config.settle + config.hold

    async def measure(level: float, stage: str) -> tuple[LevelRow, str]:
        index = len(rows)
        name = f"level-{index:02d}"
        say(f"{name}: {level:g} {config.unit} for {settle_hold:g}s ({config.settle:g}s settle)")
        scenario = level_scenario(base, config, level, settle_hold, config.settle, f"{base.name}-{name}")
        out = await run_level(scenario, sweep_dir / name, None, handle_signals, observers)
        summary = out["summary"]
        start = summary["load"]["warmup_s"]
        rates = completion_rate(read_records(sweep_dir / name), start, start + summary["duration_s"])
        row = row_from_summary(index, level, name, stage, summary, rates)
        rows.append(row)
        write_sweep(result, sweep_dir)
        if on_level is not None:
            on_level(row)
        return row, out["stop_reason"]

    if config.warmup > 0:
        say(f"warm-up: {plan[0]:g} {config.unit} for {config.warmup:g}s")
        scenario = level_scenario(base, config, plan[0], config.warmup, 0.0, f"{base.name}-warmup")
        out = await run_level(scenario, sweep_dir / "warmup", None, handle_signals, ())
        if out["stop_reason"].startswith("interrupted"):
            result.stop_reason = out["stop_reason"]
            write_sweep(result, sweep_dir)
            return result

    reason = None
    for level in plan:
        _, run_stop = await measure(level, "climb")
        if run_stop.startswith("interrupted"):
            reason = run_stop
            break
        if run_stop.startswith("aborted"):  # the level's own guard or abort threshold stopped it
            reason = f"stopped: level {level:g} {config.unit} {run_stop}"
            break
        reason = stop_reason(rows, config.stop, p99_bounds)
        if reason is not None:
            reason = f"stopped: {reason}"
            break
    else:
        reason = f"completed: highest planned level {plan[-1]:g} {config.unit} reached"
    result.stop_reason = reason

    if config.spacing == "adaptive" and not reason.startswith("interrupted"):
        knee = _summarise_knee(rows, config.unit)
        extra = refinement([r.offered for r in rows], knee["level"], config, config.max_levels - len(rows))
        for level in extra:
            _, run_stop = await measure(level, "refine")
            if run_stop.startswith("interrupted"):
                result.stop_reason = run_stop
                break

    result.knee = _summarise_knee(rows, config.unit)
    result.sla_capacity = sla_capacity(rows, slos, config.sla_max_error_rate)
    write_sweep(result, sweep_dir)
    if config.breaking is not None and not result.stop_reason.startswith("interrupted") and rows:
        result.breaking = await _break(base, config, sweep_dir, rows, result, handle_signals, say, run_level)
        write_sweep(result, sweep_dir)
    return result


async def _break(
    base: Scenario,
    config: SweepConfig,
    sweep_dir: Path,
    rows: list[LevelRow],
    result: SweepResult,
    signals: bool,
    say: Callable[[str], None],
    run_level: LevelRunner = _run,
) -> dict[str, Any]:
    b = config.breaking
    assert b is not None
    peak = b.expected_peak or result.knee.get("level") or max(r.offered for r in rows)
    level = peak * b.multiple
    if config.mode == "concurrency":
        level = float(round(level))
    cap = result.sla_capacity
    low_row = next((r for r in rows if cap and r.index == cap["index"]), min(rows, key=lambda r: r.offered))
    say(
        f"breaking: {level:g} {config.unit} ({b.multiple:g} × {peak:g}) for {b.hold:g}s, then {low_row.offered:g} for {b.recovery:g}s"
    )
    shape = break_shape(level, b.hold, low_row.offered, b.recovery)
    scenario = level_scenario(base, config, shape, b.hold + b.recovery + 0.001, 0.0, f"{base.name}-break")
    await run_level(scenario, sweep_dir / "break", None, signals, ())
    analysis = analyse_break(
        read_records(sweep_dir / "break"),
        b.hold,
        b.recovery,
        low_row.latency("ttft", "p99"),
        config.stop.max_error_rate,
        config.stop.slo_multiple,
    )
    return {"level": level, "expected_peak": peak, "multiple": b.multiple, "recovery_level": low_row.offered,
            "run_dir": "break", **analysis}  # fmt: skip
