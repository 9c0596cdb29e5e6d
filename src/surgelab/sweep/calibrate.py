"""How fast this machine can generate load: the client's own ceiling, measured (then cached by
``runner/headroom.py``).

``surgelab calibrate`` drives a zero-delay streaming server of our own
(``surgelab.testing.lean_server``: 16 output tokens a request, one pre-built write) at rising
constant rates; the ceiling is the highest rate sustained within 5 % with
schedule lag P99 under 10 ms. It is cached per machine, surgelab version and worker count,
and every run records its planned peak as a share of it (``run.json`` and the summary's
``client``), so a result that is the client's limit rather than the server's is flagged. No
peer tool publishes this.

A busy machine makes a level fail that the client could send: one noisy probe once cached 144
req/s on a machine whose ceiling measured about 40 times higher. So a level that fails is tried
again, up to ``TRIES`` times, and passes if any try does (noise only ever slows the client, so
the best try is the measure of what it can do). Each try also measures what else ran: the
machine's busy CPU less the client's and the server's own (``/proc``), steal included. A level
that failed every try while other processes held more CPU than the client and the server could
spare says nothing about the client: ``loaded_failures`` names those, and ``surgelab
calibrate`` caches nothing then, and says why.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from surgelab.aio import run_async
from surgelab.runner.backends import InProcess, Workers
from surgelab.runner.cpu import cpu_counters, cpu_usage, process_cpu_s
from surgelab.scenario import load_scenario

__all__ = ["Level", "measure", "find_ceiling", "loaded_failures", "TRIES"]

_LAG_P99_MS = 10.0
TRIES = 3  # a failing level is measured this many times before it counts as failed
_SPARE_CORES = 0.25  # other processes may use this much CPU (or all the client and server do not need)


@dataclass(frozen=True)
class Level:
    rate: float
    achieved: float
    lag_p50_ms: float
    lag_p99_ms: float
    failed: int
    other_cores: float | None = None
    """CPU that processes other than the client and the server used during the level, steal included."""
    steal_cores: float | None = None
    cpus: int | None = None
    workers: int = 1

    @property
    def sustained(self) -> bool:
        return self.achieved >= 0.95 * self.rate and self.lag_p99_ms < _LAG_P99_MS and self.failed == 0

    @property
    def loaded(self) -> bool:
        """Others took more than the machine could spare beside the client's processes and the server's one."""
        if self.other_cores is None or self.cpus is None:
            return False
        return self.other_cores > max(_SPARE_CORES, self.cpus - self.workers - 1)


def _others(start: dict, end: dict, workers: int, server_s: tuple[float | None, float | None]) -> dict:
    """The machine's CPU during a level less the client's (``cpu_usage``) and the server's."""
    usage = cpu_usage(start, end, workers) or {}
    wall = end["wall_s"] - start["wall_s"]
    server = (server_s[1] - server_s[0]) / wall if None not in server_s and wall > 0 else 0.0  # type: ignore[operator]
    other = usage.get("other_cores")
    return {"other_cores": None if other is None else round(max(other - server, 0.0), 3),
            "steal_cores": usage.get("steal_cores"), "cpus": usage.get("cpus", os.cpu_count())}  # fmt: skip


def measure(url: str, rate: float, seconds: float, workers: int, work: Path, server_pid: int | None = None) -> Level:
    """One constant-rate level against ``url`` (a scripted zero-delay server, process ``server_pid``)."""
    overrides = {
        "target.url": ("", url), "target.model": ("", "ok"), "load.rate": ("", rate),
        "load.arrival": ("", "constant"), "load.duration": ("", seconds), "load.warmup": ("", min(1.0, seconds / 4)),
        "load.max_in_flight": ("", 10_000), "workload.prompt_tokens": ("", 64), "workload.output_tokens": ("", 16),
        "validity.allow_drops": ("", True), "preflight": ("", False), "tokenizer": ("", "builtin"),  # our own server
        "guards.max_rate": ("", 100_000),  # our own loopback server: the guard against hammering others does not apply
    }  # fmt: skip
    scenario = load_scenario(None, overrides)
    run_dir = work / f"rate-{rate:.0f}-w{workers}-{len(list(work.iterdir()))}"
    pid_s = (lambda: process_cpu_s(server_pid)) if server_pid else (lambda: None)
    start, server_start = cpu_counters(), pid_s()
    backend = Workers(workers) if workers > 1 else InProcess()  # this machine's client, as backend_for picks it
    s = run_async(backend.run(scenario, run_dir)).summary
    machine = _others(start, cpu_counters(), workers, (server_start, pid_s()))
    lag = s["schedule_lag_ms"]
    return Level(rate, s["throughput"]["requests_per_s"], lag["p50"] or 0.0, lag["p99"] or 0.0,
                 s["requests"]["failed"] + s["requests"]["dropped"], workers=workers, **machine)  # fmt: skip


def find_ceiling(
    url: str, workers: int = 1, seconds: float = 3.0, start: float = 100.0, on_level=None, server_pid: int | None = None
) -> tuple[float, list[Level]]:
    """Climb ×1.5 until a level is not sustained in any of ``TRIES`` tries, then bisect three times.

    ``levels`` holds every try, in order."""
    levels: list[Level] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)

        def level(rate: float) -> bool:
            for _ in range(TRIES):
                result = measure(url, rate, seconds, workers, work, server_pid)
                levels.append(result)
                if on_level is not None:
                    on_level(result)
                if result.sustained:
                    return True
            return False

        best, rate = 0.0, start
        while rate <= 50_000 and level(rate):
            best, rate = rate, rate * 1.5
        lo, hi = best, rate
        for _ in range(3 if best else 0):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if level(mid) else (lo, mid)
        return lo, levels


def loaded_failures(levels: list[Level]) -> list[Level]:
    """The tries of rates that failed every try, each on a loaded machine: a ceiling set by them is the
    machine's load, not the client's limit (one failure on a quiet machine is evidence enough)."""
    tries: dict[float, list[Level]] = {}
    for lv in levels:
        tries.setdefault(lv.rate, []).append(lv)
    return [lv for group in tries.values() if all(t.loaded and not t.sustained for t in group) for lv in group]
