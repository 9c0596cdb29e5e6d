"""How fast can one surgelab process drive a streaming server, and how late does it run?

Prints, measured in this one run on this machine against a zero-delay streaming server
(16 output tokens a request, loopback):
  * the client ceiling: the highest constant open-loop rate whose achieved throughput is
    within 5 % of the offered rate with schedule lag P99 under 10 ms;
  * schedule lag P50/P99 at a fixed high rate;
  * the ratio of the ceiling to that fixed rate.
The server runs in its own process, so on a 2-core machine client and server each get
about one core: the figure is a floor for the client alone.

    python benchmarks/client_ceiling.py [--seconds 4] [--fixed-rate 300]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from surgelab.testing.process import scripted_server

from surgelab.runner import run_scenario
from surgelab.runner.loop import run_async
from surgelab.scenario import load_scenario


def measure(url: str, rate: float, seconds: float, workdir: Path) -> dict:
    overrides = {
        "target.url": ("", url), "target.model": ("", "ok"), "load.rate": ("", rate),
        "load.arrival": ("", "constant"), "load.duration": ("", seconds), "load.warmup": ("", min(1.0, seconds / 4)),
        "load.max_in_flight": ("", 5000), "workload.prompt_tokens": ("", 64), "workload.output_tokens": ("", 16),
        "validity.allow_drops": ("", True),
    }  # fmt: skip
    scenario = load_scenario(None, overrides)
    result = run_async(run_scenario(scenario, workdir / f"rate-{rate:g}"))
    s = result.summary
    return {
        "rate": rate,
        "achieved": s["throughput"]["requests_per_s"],
        "lag_p50": s["schedule_lag_ms"]["p50"],
        "lag_p99": s["schedule_lag_ms"]["p99"],
        "errors": s["requests"]["failed"] + s["requests"]["dropped"],
        "ttft_p50": s["latency_ms"]["ttft"]["p50"],
    }


def sustains(row: dict) -> bool:
    return row["achieved"] >= 0.95 * row["rate"] and (row["lag_p99"] or 0) < 10 and row["errors"] == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="duration of each level")
    parser.add_argument("--fixed-rate", type=float, default=300.0, help="rate for the schedule-lag figure")
    parser.add_argument("--start", type=float, default=100.0, help="first rate of the search")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, scripted_server() as url:
        work = Path(tmp)
        print(f"{'offered':>9} {'achieved':>9} {'lag p50':>8} {'lag p99':>8} {'errors':>6}  ttft p50")
        best, rate, rows = 0.0, args.start, []
        while rate <= 20000:
            row = measure(url, rate, args.seconds, work)
            rows.append(row)
            print(f"{row['rate']:9.0f} {row['achieved']:9.1f} {row['lag_p50']:8.2f} {row['lag_p99']:8.2f} "
                  f"{row['errors']:6d}  {row['ttft_p50']:.2f} ms")  # fmt: skip
            if not sustains(row):
                break
            best, rate = rate, rate * 1.5
        if best:  # refine between the last good and the first bad level
            lo, hi = best, rate
            for _ in range(3):
                mid = (lo + hi) / 2
                row = measure(url, mid, args.seconds, work)
                print(f"{row['rate']:9.0f} {row['achieved']:9.1f} {row['lag_p50']:8.2f} {row['lag_p99']:8.2f} "
                      f"{row['errors']:6d}  {row['ttft_p50']:.2f} ms")  # fmt: skip
                lo, hi = (mid, hi) if sustains(row) else (lo, mid)
            best = lo
        fixed = measure(url, args.fixed_rate, args.seconds, work)
    print()
    print(f"client ceiling (1 process, streaming, 16 tokens): {best:.0f} req/s")
    print(f"schedule lag at {args.fixed_rate:g} req/s: p50 {fixed['lag_p50']:.2f} ms, p99 {fixed['lag_p99']:.2f} ms")
    print(f"ceiling / fixed rate = {best / args.fixed_rate:.2f}")


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    main()
