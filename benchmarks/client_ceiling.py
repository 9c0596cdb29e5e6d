"""How fast can surgelab drive a streaming server, with one worker and with two?

Prints, measured in this one run on this machine against a zero-delay streaming server
(16 output tokens a request, loopback; the server in its own process):
  * the client ceiling with 1 and 2 workers — the highest constant open-loop rate sustained
    within 5 % with schedule lag P99 under 10 ms (``surgelab calibrate``'s search);
  * the ratio of the two, and schedule lag at a fixed high rate.

The server is nginx by default (``--server nginx``; Debian package, one worker process, a
fixed pre-built stream from memory, see ``native_server.py``): a native server costs almost
no CPU, so it is neither what limits the client nor what takes the core a second worker
needs. ``--server scripted`` uses the Python scripted server (aiohttp) instead, which on
2 cores needs most of one at 2,000–4,000 req/s. Client and server still share the machine's
cores, so the figures are a floor.

    python benchmarks/client_ceiling.py [--seconds 3] [--fixed-rate 300] [--server nginx|scripted]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from native_server import SERVERS, describe, reference_server

from surgelab.sweep.calibrate import find_ceiling, measure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each level")
    parser.add_argument("--fixed-rate", type=float, default=300.0, help="rate for the schedule-lag figure")
    parser.add_argument("--start", type=float, default=150.0, help="first rate of the search")
    parser.add_argument("--server", choices=SERVERS, default="nginx",
                        help="zero-delay reference server: nginx (native, default) or scripted (Python, aiohttp)")  # fmt: skip
    args = parser.parse_args()

    def show(level) -> None:
        print(f"  {level.rate:8.0f} → {level.achieved:8.1f} req/s, lag p50 {level.lag_p50_ms:6.2f} p99 {level.lag_p99_ms:6.2f} ms"
              f"{'' if level.sustained else '  (not sustained)'}")  # fmt: skip

    ceilings = {}
    with reference_server(args.server) as url:
        print(f"server: {describe(args.server)} at {url}")
        for workers in (1, 2):
            print(f"{workers} worker(s):")
            ceilings[workers], _ = find_ceiling(url, workers, args.seconds, args.start, on_level=show)
        with tempfile.TemporaryDirectory() as tmp:
            fixed = measure(url, args.fixed_rate, args.seconds, 1, Path(tmp))
    print()
    print(f"client ceiling, 1 worker:  {ceilings[1]:.0f} req/s")
    print(f"client ceiling, 2 workers: {ceilings[2]:.0f} req/s  (×{ceilings[2] / ceilings[1]:.2f})")
    print(
        f"schedule lag at {args.fixed_rate:g} req/s, 1 worker: p50 {fixed.lag_p50_ms:.2f} ms, p99 {fixed.lag_p99_ms:.2f} ms"
    )


if __name__ == "__main__":
    main()
