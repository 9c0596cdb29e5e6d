"""Who used the machine's CPU during a run: the load generator itself, or something else.

A client that falls behind its schedule is either overloaded by its own work (more worker
processes help) or starved by other processes on the same machine (an inference engine on
the same host busy-polls a core): the two call for opposite fixes, and only the CPU accounts
tell them apart. The counters are read at the start and the end of a run: the process's own
CPU time (worker processes included once they have been waited for) and, on Linux, the
machine's busy and total time from ``/proc/stat``.
"""

from __future__ import annotations

import os
import time
from typing import Any

__all__ = ["cpu_counters", "cpu_usage"]

_PROC_STAT = "/proc/stat"


def _machine_ticks() -> tuple[int, int] | None:
    """(busy, total) clock ticks of all CPUs since boot; busy leaves out idle and I/O wait."""
    try:
        with open(_PROC_STAT, encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
    total = sum(ticks)
    return total - ticks[3] - ticks[4], total


def cpu_counters() -> dict[str, Any]:
    """The counters now, as plain numbers (they are kept in run.json until the run ends)."""
    times = os.times()
    machine = _machine_ticks()
    return {
        "client_cpu_s": times.user + times.system + times.children_user + times.children_system,
        "wall_s": time.monotonic(),
        "busy_ticks": machine[0] if machine else None,
        "total_ticks": machine[1] if machine else None,
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
    }
    if start["total_ticks"] is not None and end["total_ticks"] is not None:
        total = end["total_ticks"] - start["total_ticks"]
        if total > 0:
            busy = (end["busy_ticks"] - start["busy_ticks"]) / total * cpus
            usage["machine_busy_cores"] = round(busy, 3)
            usage["other_cores"] = round(max(busy - client, 0.0), 3)
    return usage
