"""Simulate a scenario on a fleet and leave a run directory just like a measured run's.

``records.parquet``, ``summary.json``, ``scenario.yaml`` and ``run.json`` are the files a
real run writes (times on the virtual run clock), so every analysis reads them unchanged.
A simulation adds ``fleet.parquet`` (the timeline), ``fleet.json`` (cost, shedding, cache,
failures, autoscaler decisions) and a ``fleet`` block in ``summary.json``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from surgelab.analysis.failover import simulated_switch_overs
from surgelab.analysis.finish import FLEET_FILE, finish_summary
from surgelab.analysis.summary import RecordColumns, meets_slo
from surgelab.engine.accuracy import error_bar
from surgelab.metrics.record import State
from surgelab.metrics.rundir import prepare_run_dir, run_info, write_json, write_run_info
from surgelab.metrics.store import MetaRow
from surgelab.scenario.model import Scenario
from surgelab.sim.cache import memory_traded
from surgelab.sim.fleet import Fleet
from surgelab.sim.recorder import Recorder
from surgelab.sim.request import SimOutcome
from surgelab.sim.simulator import Simulator, StopSimulation
from surgelab.units import SECOND

__all__ = ["SimResult", "simulate", "fleet_report", "comparison_rows"]


@dataclass
class SimResult:
    run_dir: Path
    summary: dict[str, Any]
    fleet: dict[str, Any]
    stop_reason: str = "completed"


def simulate(scenario: Scenario, fleet: Fleet, run_dir: Path, *, fast: bool = True, fast_prefix: bool | None = None,
             stop: Callable[[MetaRow, SimOutcome], str | None] | None = None) -> SimResult:  # fmt: skip
    """Run ``scenario`` against ``fleet`` in virtual time and write the run directory.

    ``fast=False`` steps every engine one ``Engine.step()`` at a time (the reference path), and
    hashes prompts for the prefix cache by the definition (``sim.prefix.reference_hashes``);
    ``fast_prefix`` chooses the hashing alone. ``stop`` sees every outcome as it is recorded and
    ends the simulation where it is by returning why (a search that has seen its objective lost);
    the requests still under way are then not recorded, and ``run.json``'s ``stop_reason`` says so.
    """
    run_dir = prepare_run_dir(run_dir, scenario)
    recorder = Recorder(run_dir)
    record = recorder if stop is None else _watched(recorder, stop)
    sim = Simulator(scenario, fleet, record, fast, fast_prefix)
    plans = sim.traffic.plans
    info = run_info(plans, fleet=fleet.name)
    wall = time.perf_counter()
    end_ns = sim.run()
    wall = time.perf_counter() - wall
    table = recorder.close()
    if sim.stops.reason:  # a stop rule, as in a measured run
        reason, stopped_at = sim.stops.reason, min(sim.stops.at_ns or 0, max(p.end_ns for p in plans))
    else:
        reason = f"stopped: {sim.stopped}" if sim.stopped else "completed"
        stopped_at = sim.now if sim.stopped else max(p.end_ns for p in plans)
    info.update(stop_reason=reason, stopped_at_s=stopped_at / SECOND, wall_s=wall, simulated_end_s=end_ns / SECOND)
    bound = _switch_over_bound(fleet, scenario)
    if sim.failures or bound is not None:  # judged like a live drill's (analysis.failover)
        info["failover"] = {"switch_overs": simulated_switch_overs(sim.failures, end_ns / SECOND), "bound_s": bound}
    write_run_info(run_dir, info)
    pq.write_table(sim.timeline.table(), run_dir / "fleet.parquet", compression="zstd")
    report = fleet_report(sim, fleet, end_ns, wall, table, scenario, recorder.count)
    write_json(run_dir / FLEET_FILE, report)
    return SimResult(run_dir, finish_summary(scenario, run_dir, info, table), report, reason)


def _watched(recorder: Recorder, stop: Callable[[MetaRow, SimOutcome], str | None]):
    """``recorder``, then ``stop``: a reason from it ends the simulation."""

    def record(meta: MetaRow, outcome: SimOutcome) -> None:
        recorder(meta, outcome)
        reason = stop(meta, outcome)
        if reason:
            raise StopSimulation(reason)

    return record


def _switch_over_bound(fleet: Fleet, scenario: Scenario) -> float | None:
    """The fleet's ``router.health_check.max_switch_over``, else the scenario's ``routing.health`` one."""
    check = fleet.router.health_check
    own = check.max_switch_over if check is not None else None
    return own if own is not None else scenario.routing.health.max_switch_over


def _violations(table: pa.Table, scenario: Scenario) -> int:
    """Measured requests that did not end ``ok`` within every objective of their tier.

    The summary's goodput test (``meets_slo``) on just the columns it needs; cancelled
    requests are not counted either way.
    """
    itl = table.schema.get_field_index("itl_us")
    no_itl = all(slo.itl is None for slo in [scenario.slo, *(scenario.slo_of(t) for t in scenario.tiers)])
    if no_itl:  # no ITL objective: leave out every gap before filtering, the costly part
        table = table.remove_column(itl)
    measured = table.filter(pc.invert(table["warmup"]))
    state = measured["state"]
    ok = pc.equal(state, State.OK.value).to_numpy(zero_copy_only=False)
    counted = measured.num_rows - int(pc.sum(pc.equal(state, State.CANCELLED.value)).as_py() or 0)
    if not ok.any():
        return counted
    rows = measured.filter(pa.array(ok))
    if no_itl:
        empty = pa.ListArray.from_arrays(
            pa.array(np.zeros(rows.num_rows + 1, dtype=np.int32)), pa.array([], type=pa.int32())
        )
        rows = rows.add_column(itl, "itl_us", empty)
    good = meets_slo(RecordColumns(rows), np.ones(rows.num_rows, dtype=bool), scenario)
    return counted - int(good.sum())


def _prefix_cache(replica: Any) -> Any:
    """The replica engine's KV cache when its prefix cache is on (none for a latency curve)."""
    kv = getattr(getattr(replica.backend, "engine", None), "kv", None)
    return kv if kv is not None and kv.prefix_caching else None


def fleet_report(
    sim: Simulator, fleet: Fleet, end_ns: int, wall_s: float, table, scenario: Scenario, n: int
) -> dict[str, Any]:
    duration_s = end_ns / SECOND
    pools = {}
    total_hours = total_cost = 0.0
    for pool in sim.pools:
        seconds = sum(r.alive_ns(end_ns) for r in pool.replicas) / SECOND
        hours = seconds / 3600
        cost = hours * pool.cfg.cost_per_hour
        total_hours += hours
        total_cost += cost
        pools[pool.name] = {
            "replica_hours": hours,
            "average_instances": seconds / duration_s if duration_s else 0.0,
            "peak_replicas": int(
                max(sim.timeline.rows["replicas"][i] for i, p in enumerate(sim.timeline.rows["pool"]) if p == pool.name)
            )
            if sim.timeline.rows["t_s"]
            else pool.cfg.replicas,
            "cost": cost,
            "dispatched": sum(r.received for r in pool.replicas),
            "dispatched_by_replica": [r.received for r in pool.replicas],
            "autoscaler": [d.__dict__ for d in pool.decisions],
        }
        caches = [kv for r in pool.replicas if (kv := _prefix_cache(r)) is not None] if fleet.cache.prefix else []
        if caches:
            asked, found = sum(kv.queried_blocks for kv in caches), sum(kv.found_blocks for kv in caches)
            pools[pool.name]["prefix_cache"] = {"prompt_blocks": asked, "found_blocks": found,
                                                "hit_rate": found / asked if asked else None}  # fmt: skip
    lookups = sim.cache.hits + sim.cache.misses
    extra: dict[str, Any] = {}
    if fleet.cache.exact:
        engines = [p.profile for p in sim.pools if p.profile is not None]
        extra["caches"] = [memory_traded("response", sim.cache, engines[0] if engines else None, _mean_context(table))]
    if sim.regions:
        extra["regions"] = _regions(sim)
    if sim.affinity is not None:
        extra["affinity"] = sim.affinity.report()
    bars = {pool.name: bar.to_dict() for pool in sim.pools if pool.profile and (bar := error_bar(pool.profile))}
    if bars:  # how sure the engine model is, for each pool it times
        extra["model_error"] = bars
    return {
        "name": fleet.name,
        "duration_s": duration_s,
        "average_instances": total_hours * 3600 / duration_s if duration_s else 0.0,
        "replica_hours": total_hours,
        "cost": total_cost,
        "shed": sim.shed,
        "lost": sim.lost,
        "sla_violations": _violations(table, scenario),
        "cache_hits": sim.cache.hits,
        "cache_hit_rate": sim.cache.hits / lookups if lookups else None,
        "failures": sim.failures,
        "pools": pools,
        "events": sim.events_processed,
        "wall_s": wall_s,
        "requests_per_wall_s": n / wall_s if wall_s > 0 else None,
        "config": _config(fleet),
        **extra,
    }


def _config(fleet: Fleet) -> dict[str, Any]:
    """The fleet as given; options added later are left out while unset, so older outputs stay as they were."""
    data = fleet.model_dump(mode="json", by_alias=True)
    if not data["regions"]:
        del data["regions"]
    for pool in data["pools"]:
        if pool["region"] is None:
            del pool["region"]
    if data["router"]["affinity"] is None:
        del data["router"]["affinity"]
    cache = data["cache"]
    if cache["memory_gb"] is None and cache["min_hit_rate"] == 0.2:
        del cache["memory_gb"], cache["min_hit_rate"]
    return data


def _mean_context(table: pa.Table) -> float | None:
    """Mean prompt + output tokens of the requests answered: the context a sequence holds at its end."""
    ok = table.filter(pc.equal(table["state"], State.OK.value))
    if not ok.num_rows:
        return None
    total = pc.add(pc.fill_null(ok["prompt_tokens"], 0), pc.fill_null(ok["output_tokens"], 0))
    return float(pc.mean(total).as_py())


def _regions(sim: Simulator) -> dict[str, Any]:
    """Per region: its network, the requests sent to its pools, and each outage with what it cost."""
    out = {}
    for name, region in sim.regions.items():
        outages = []
        for o in region.cfg.outages:
            hit = [f for f in sim.failures if f.get("region") == name and f["at_s"] == o.at]
            detected = [f["detected_at_s"] for f in hit if f["detected_at_s"] is not None]
            outages.append({
                "at_s": o.at, "until_s": o.at + o.duration, "replicas": len(hit),
                "lost_in_flight": sum(f["lost_in_flight"] for f in hit),
                "lost_routed": sum(f["lost_routed"] for f in hit),
                "detected_at_s": max(detected) if len(detected) == len(hit) and hit else None,
            })  # fmt: skip
        out[name] = {
            "rtt_s": region.cfg.rtt,
            "jitter_s": region.cfg.jitter,
            "pools": [p.name for p in region.pools],
            "dispatched": sum(r.received for p in region.pools for r in p.replicas),
            "outages": outages,
        }
    return out


def comparison_rows(results: list[SimResult]) -> list[dict[str, Any]]:
    rows = []
    for r in results:
        s, f = r.summary, r.fleet
        rows.append({
            "fleet": f["name"],
            "sla_violations": f["sla_violations"],
            "measured": s["requests"]["measured"],
            "p99_ttft_ms": s["latency_ms"]["ttft"]["p99"],
            "p99_e2e_ms": s["latency_ms"]["e2e"]["p99"],
            "shed": f["shed"],
            "lost": f["lost"],
            "average_instances": f["average_instances"],
            "replica_hours": f["replica_hours"],
            "cost": f["cost"],
            "run_dir": str(r.run_dir),
        })  # fmt: skip
    return rows
