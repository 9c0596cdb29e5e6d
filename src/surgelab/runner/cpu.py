"""Who used the machine's CPU during a run: the load generator itself, or something else.

A client that falls behind its schedule is either overloaded by its own work (more worker
processes help) or starved by other processes on the same machine (an inference engine on
the same host busy-polls a core): the two call for opposite fixes, and only the CPU accounts
tell them apart. The counters are read at the start and the end of a run: the process's own
CPU time (worker processes included once they have been waited for) and, on Linux, the
machine's busy and total time from ``/proc/stat``. A run's average can hide the moments that
matter (an engine's busy bursts), so the machine is also read once a second, from a thread
of its own: a starved event loop would sample late exactly when it counts.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

__all__ = ["CpuWatch", "cpu_counters", "cpu_usage", "process_cpu_s"]

SATURATED = 0.9  # a second with this share of every core busy left no room for the client

_PROC_STAT = "/proc/stat"
_STATM = "/proc/self/statm"
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_RSS_POINTS = 600  # a day-long soak keeps one memory point every 2.4 minutes


def _rss_mb() -> float | None:
    """This process's resident memory, MiB (Linux)."""
    try:
        with open(_STATM, encoding="ascii") as f:
            return int(f.read().split()[1]) * _PAGE / 2**20
    except (OSError, IndexError, ValueError):
        return None


def _machine_ticks() -> tuple[int, int, int] | None:
    """(busy, total, steal) clock ticks of all CPUs since boot; busy leaves out idle and I/O wait, and
    includes the ticks the hypervisor gave to other guests (steal)."""
    try:
        with open(_PROC_STAT, encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
    total = sum(ticks)
    return total - ticks[3] - ticks[4], total, ticks[7]


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds another process has used (user + system, its waited-for children included), on Linux."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rpartition(")")[2].split()  # the name may hold spaces: count from after it
    except OSError:
        return None
    return sum(int(x) for x in fields[11:15]) / _CLOCK_TICKS  # utime stime cutime cstime


def cpu_counters() -> dict[str, Any]:
    """The counters now, as plain numbers."""
    times = os.times()
    machine = _machine_ticks()
    return {
        "client_cpu_s": times.user + times.system + times.children_user + times.children_system,
        "wall_s": time.monotonic(),
        "busy_ticks": machine[0] if machine else None,
        "total_ticks": machine[1] if machine else None,
        "steal_ticks": machine[2] if machine else None,
    }


def cpu_usage(start: dict[str, Any], end: dict[str, Any], processes: int = 1) -> dict[str, Any] | None:
    """Cores in use on average between two ``cpu_counters()``: the client's (``processes`` of it), and the machine's."""
    wall = end["wall_s"] - start["wall_s"]
    if wall <= 0:
        return None
    cpus = os.cpu_count() or 1
    client = (end["client_cpu_s"] - start["client_cpu_s"]) / wall
    usage: dict[str, Any] = {
        "cpus": cpus,
        "client_processes": processes,
        "client_cores": round(client, 3),
        "machine_busy_cores": None,
        "other_cores": None,
        "steal_cores": None,
    }
    if start["total_ticks"] is not None and end["total_ticks"] is not None:
        total = end["total_ticks"] - start["total_ticks"]
        if total > 0:
            busy = (end["busy_ticks"] - start["busy_ticks"]) / total * cpus
            usage["machine_busy_cores"] = round(busy, 3)
            usage["other_cores"] = round(max(busy - client, 0.0), 3)
            usage["steal_cores"] = round((end["steal_ticks"] - start["steal_ticks"]) / total * cpus, 3)
    return usage


class CpuWatch:
    """The run's CPU accounts, start to end, with the machine's busy cores second by second.

    ``with CpuWatch(processes) as cpu: … cpu.usage()``: the block for run.json (``cpu_usage``'s,
    plus the busiest second and how many seconds were saturated).
    """

    def __init__(self, processes: int = 1, interval_s: float = 1.0) -> None:
        self.processes, self.interval_s = processes, interval_s
        self.seconds: list[float] = []  # the machine's busy cores in each interval
        self.rss_mb: list[float] = []  # the client's resident memory at each interval (a leak shows as a slope)
        self._start = cpu_counters()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="surgelab-cpu", daemon=True)

    def __enter__(self) -> CpuWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()

    def _sample(self) -> None:
        cpus = os.cpu_count() or 1
        last = _machine_ticks()
        while last is not None and not self._done.wait(self.interval_s):
            now = _machine_ticks()
            if now is None:
                return
            if now[1] > last[1]:
                self.seconds.append((now[0] - last[0]) / (now[1] - last[1]) * cpus)
            last = now
            if (rss := _rss_mb()) is not None:
                self.rss_mb.append(rss)

    def usage(self) -> dict[str, Any] | None:
        """Stop watching and say what was seen."""
        self._done.set()
        if self._thread.is_alive():
            self._thread.join(self.interval_s * 2)
        usage = cpu_usage(self._start, cpu_counters(), self.processes)
        if usage is not None and self.seconds:
            usage.update(
                seconds=len(self.seconds),
                busiest_second_cores=round(max(self.seconds), 3),
                saturated_seconds=sum(1 for busy in self.seconds if busy >= SATURATED * usage["cpus"]),
            )
        if usage is not None and self.rss_mb:
            step = -(-len(self.rss_mb) // _RSS_POINTS)  # every step-th point, at most _RSS_POINTS of them
            usage.update(rss_interval_s=self.interval_s * step, rss_mb=[round(v, 2) for v in self.rss_mb[::step]])
        return usage
