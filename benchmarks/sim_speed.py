"""How fast ``surgelab simulate`` runs: one simulated hour at 100 requests/s on 4 replicas.

The fleet is four ``llama3-8b-h100`` replicas behind a least-outstanding router; the
scenario is Poisson arrivals at 100 requests/s for an hour with the quickstart's workload
(log-normal prompts around 400 tokens, 128 output tokens), about 360,000 requests and two
million engine steps. Prints the wall time of the whole command (schedule, simulation,
records, summary), of the event loop alone, the process's CPU time (what other processes on
a shared machine cannot inflate), and simulated requests per wall second.
``--reference`` steps every engine one ``Engine.step()`` at a time instead of in runs.

    python benchmarks/sim_speed.py                  # the hour
    python benchmarks/sim_speed.py --duration 600   # a shorter check
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from surgelab.scenario.loader import build_scenario
from surgelab.sim import build_fleet, simulate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=3600.0, help="simulated seconds")
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--profile", default="llama3-8b-h100")
    parser.add_argument("--reference", action="store_true", help="step the engines one step at a time")
    args = parser.parse_args()
    scenario = build_scenario({
        "name": "sim-speed", "seed": 1,
        "target": {"url": "http://127.0.0.1:9/v1", "model": "m"},
        "load": {"rate": args.rate, "duration": f"{args.duration}s", "max_in_flight": 100_000},
        "workload": {"prompt_tokens": {"dist": "lognormal", "mean": 400, "std": 200, "max": 2000}, "output_tokens": 128},
        "slo": {"ttft": "500ms"},
    })  # fmt: skip
    fleet = build_fleet({"name": "four", "pools": [{"replicas": args.replicas, "profile": args.profile}]})
    with tempfile.TemporaryDirectory() as tmp:
        started, cpu = time.perf_counter(), time.process_time()
        result = simulate(scenario, fleet, Path(tmp) / "run", fast=not args.reference)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    s, f = result.summary, result.fleet
    n = s["requests"]["scheduled"]
    print(
        f"simulated {args.duration:g} s at {args.rate:g} req/s on {args.replicas} × {args.profile}: {n:,} requests, {f['events']:,} events"
    )
    print(
        f"wall {wall:.1f} s (event loop {f['wall_s']:.1f} s; CPU {cpu:.1f} s) → {n / wall:,.0f} simulated requests per wall second"
    )
    print(f"P50/P99 E2E {s['latency_ms']['e2e']['p50']:.0f}/{s['latency_ms']['e2e']['p99']:.0f} ms, "
          f"TTFT P99 {s['latency_ms']['ttft']['p99']:.0f} ms, mean in flight {s['concurrency']['mean_in_flight']:.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
