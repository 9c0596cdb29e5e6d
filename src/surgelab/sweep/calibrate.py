"""How fast this machine can generate load: the client's own ceiling, measured (then cached by
``runner/headroom.py``).

``surgelab calibrate`` drives a zero-delay streaming server of our own
(``surgelab.testing.lean_server``: 16 output tokens a request, one pre-built write) at rising
constant rates; the ceiling is the highest rate sustained within 5 % with
schedule lag P99 under 10 ms. It is cached per machine, surgelab version and worker count,
and every run records its planned peak as a share of it (``run.json`` and the summary's
``client``), so a result that is the client's limit rather than the server's is flagged. No
peer tool publishes this.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from surgelab.aio import run_async
from surgelab.runner.backends import backend_for
from surgelab.scenario import load_scenario

__all__ = ["Level", "measure", "find_ceiling"]

_LAG_P99_MS = 10.0


@dataclass(frozen=True)
class Level:
    rate: float
    achieved: float
    lag_p50_ms: float
    lag_p99_ms: float
    failed: int

    @property
    def sustained(self) -> bool:
        return self.achieved >= 0.95 * self.rate and self.lag_p99_ms < _LAG_P99_MS and self.failed == 0


def measure(url: str, rate: float, seconds: float, workers: int, work: Path) -> Level:
    """One constant-rate level against ``url`` (a scripted zero-delay server)."""
    overrides = {
        "target.url": ("", url), "target.model": ("", "ok"), "load.rate": ("", rate),
        "load.arrival": ("", "constant"), "load.duration": ("", seconds), "load.warmup": ("", min(1.0, seconds / 4)),
        "load.max_in_flight": ("", 10_000), "workload.prompt_tokens": ("", 64), "workload.output_tokens": ("", 16),
        "validity.allow_drops": ("", True),
        "guards.max_rate": ("", 100_000),  # our own loopback server: the guard against hammering others does not apply
    }  # fmt: skip
    scenario = load_scenario(None, overrides)
    run_dir = work / f"rate-{rate:.0f}-w{workers}"
    s = run_async(backend_for(scenario, workers=workers).run(scenario, run_dir)).summary
    lag = s["schedule_lag_ms"]
    return Level(rate, s["throughput"]["requests_per_s"], lag["p50"] or 0.0, lag["p99"] or 0.0,
                 s["requests"]["failed"] + s["requests"]["dropped"])  # fmt: skip


def find_ceiling(url: str, workers: int = 1, seconds: float = 3.0, start: float = 100.0, on_level=None) -> tuple[float, list[Level]]:
    """Climb ×1.5 until a level is not sustained, then bisect three times."""
    levels: list[Level] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)

        def level(rate: float) -> Level:
            result = measure(url, rate, seconds, workers, work)
            levels.append(result)
            if on_level is not None:
                on_level(result)
            return result

        best, rate = 0.0, start
        while rate <= 50_000 and level(rate).sustained:
            best, rate = rate, rate * 1.5
        lo, hi = best, rate
        for _ in range(3 if best else 0):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if level(mid).sustained else (lo, mid)
        return lo, levels
