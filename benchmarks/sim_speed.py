"""How fast ``surgelab simulate`` runs: one simulated hour at 100 requests/s on 4 replicas.

The fleet is four ``llama3-8b-h100`` replicas behind a least-outstanding router; the
scenario is Poisson arrivals at 100 requests/s for an hour with the quickstart's workload
(log-normal prompts around 400 tokens, 128 output tokens), about 360,000 requests and two
million engine steps. The figure is simulated requests per CPU second of the whole command
(schedule, simulation, records, summary): CPU time (``time.process_time``) is what other
processes on a shared machine inflate least. Also printed: the CPU seconds of the event loop
alone (``Simulator.run``, records built as requests finish), of writing ``records.parquet``
and of ``summarize()``, and the wall time. ``--reference`` steps every engine one
``Engine.step()`` per event instead of ``Engine.run``/``plan``/``advance``. ``--prefix``
turns the fleet's prefix cache on (``cache: {prefix: true}``) and gives every request one
shared system prompt of ``--system-prompt`` tokens (100 unless set; set it without
``--prefix`` for the same workload with the cache off).

    python benchmarks/sim_speed.py                  # the hour
    python benchmarks/sim_speed.py --duration 600   # a shorter check
    python benchmarks/sim_speed.py --duration 120 --prefix            # prefix cache on
    python benchmarks/sim_speed.py --duration 120 --system-prompt 100  # the same prompts, cache off
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import surgelab.sim.run as sim_run
from surgelab.scenario.loader import build_scenario
from surgelab.sim import build_fleet, simulate


def _timed(cpu: dict[str, float], name: str, fn):
    """``fn``, adding its CPU seconds to ``cpu[name]``."""

    def timed(*args, **kwargs):
        started = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            cpu[name] = cpu.get(name, 0.0) + time.process_time() - started

    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=3600.0, help="simulated seconds")
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--profile", default="llama3-8b-h100")
    parser.add_argument("--reference", action="store_true", help="step the engines one step per event")
    parser.add_argument("--prefix", action="store_true", help="the prefix cache on, and a shared system prompt")
    parser.add_argument("--system-prompt", type=int, default=None, help="system prompt tokens (--prefix: 100)")
    args = parser.parse_args()
    system = args.system_prompt if args.system_prompt is not None else (100 if args.prefix else 0)
    scenario = build_scenario({
        "name": "sim-speed", "seed": 1,
        "target": {"url": "http://127.0.0.1:9/v1", "model": "m"},
        "load": {"rate": args.rate, "duration": f"{args.duration}s", "max_in_flight": 100_000},
        "workload": {"prompt_tokens": {"dist": "lognormal", "mean": 400, "std": 200, "max": 2000}, "output_tokens": 128,
                     "system_prompt_tokens": system},
        "slo": {"ttft": "500ms"},
    })  # fmt: skip
    pools = [{"replicas": args.replicas, "profile": args.profile}]
    fleet = build_fleet({"name": "four", "pools": pools, "cache": {"prefix": args.prefix}})
    parts: dict[str, float] = {}
    for owner, name, label in ((sim_run.Simulator, "run", "event loop"), (sim_run.Recorder, "close", "records.parquet"),
                               (sim_run, "summarize", "summarize")):  # fmt: skip
        if hasattr(owner, name):  # the parts are reported when the code is laid out as expected
            setattr(owner, name, _timed(parts, label, getattr(owner, name)))
    with tempfile.TemporaryDirectory() as tmp:
        started, cpu = time.perf_counter(), time.process_time()
        result = simulate(scenario, fleet, Path(tmp) / "run", fast=not args.reference)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    s, f = result.summary, result.fleet
    n = s["requests"]["scheduled"]
    cache = f", prefix cache on, {system}-token system prompt" if args.prefix else (f", {system}-token system prompt" if system else "")
    print(
        f"simulated {args.duration:g} s at {args.rate:g} req/s on {args.replicas} × {args.profile}{cache}: {n:,} requests, {f['events']:,} events"
    )
    print(
        f"CPU {cpu:.1f} s → {n / cpu:,.0f} simulated requests per CPU second (wall {wall:.1f} s, {n / wall:,.0f} per wall second)"
    )
    if parts:
        loop = parts.get("event loop")
        alone = f"; the event loop alone: {n / loop:,.0f} requests per CPU second" if loop else ""
        print("of which CPU: " + ", ".join(f"{k} {v:.1f} s" for k, v in parts.items()) + alone)
    print(f"P50/P99 E2E {s['latency_ms']['e2e']['p50']:.0f}/{s['latency_ms']['e2e']['p99']:.0f} ms, "
          f"TTFT P99 {s['latency_ms']['ttft']['p99']:.0f} ms, mean in flight {s['concurrency']['mean_in_flight']:.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
