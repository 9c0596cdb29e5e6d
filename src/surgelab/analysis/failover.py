"""``failover`` in summary.json: how long each failing target kept getting requests, against the plan's bound.

A switch-over is measured from a target's **first failure** — the send of the first request of
the failing run that took it out, or the start of the first failed health check of that streak,
whichever came first — to the **last request sent to it** before it came back (or the run
ended). That is the time users' requests kept going to a dead target, which is what a plan's
"switch-over < 30 s" bounds. A target whose last requests all failed (at least the
``health.failures`` that would take it out) but which was never taken out has no switch-over:
it is reported as failing for as long as it was sent requests, which fails the bound once that
is the bound or more. The simulated router reports its own (crash → detection, ``fleet.json``
``switch_over_s``) and is judged the same way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["live_switch_overs", "simulated_switch_overs", "failover_block", "failover_threshold"]


def live_switch_overs(c: Any, routing: dict[str, Any], failures: int) -> list[dict[str, Any]]:
    """Every target's switch-overs from the records (``c``: the summary's columns) and the router's events."""
    result = []
    events = routing.get("events", [])
    for name in routing.get("targets", {}):
        rows = (c.target == name) & ~np.isnan(c.sent)
        order = np.argsort(c.sent[rows], kind="stable")
        sent, ok = c.sent[rows][order], c.outcomes.ok[rows][order]
        mine = [e for e in events if e["target"] == name]
        span_start = -np.inf
        for i, event in enumerate(mine):
            if event["event"] != "down":
                span_start = event["t_s"]
                continue
            back = next((e["t_s"] for e in mine[i + 1 :] if e["event"] == "up"), np.inf)
            before = (sent > span_start) & (sent <= event["t_s"])
            first = _failing_since(sent[before], ok[before])
            known = [t for t in (first, event.get("first_failure_s")) if t is not None]
            start = min(known) if known else event["t_s"]
            last = sent[(sent >= start) & (sent < back)]
            last_s = float(last.max()) if last.size else start
            result.append({"target": name, "first_failure_s": start, "taken_out_s": event["t_s"], "last_sent_s": last_s,
                           "switch_over_s": last_s - start, "taken_out": True})  # fmt: skip
            span_start = back
        tail = sent > span_start
        first = _failing_since(sent[tail], ok[tail], least=failures)
        if first is not None:  # failing at the end, never taken out
            last_s = float(sent[tail].max())
            result.append({"target": name, "first_failure_s": first, "taken_out_s": None, "last_sent_s": last_s,
                           "switch_over_s": None, "failing_for_s": last_s - first, "taken_out": False})  # fmt: skip
    return result


def _failing_since(sent: np.ndarray, ok: np.ndarray, least: int = 1) -> float | None:
    """The send time of the first of the requests (in send order) that all failed after the last success,
    when they are at least ``least``; None otherwise."""
    successes = np.flatnonzero(ok)
    failing = sent[successes[-1] + 1 :] if successes.size else sent
    return float(failing[0]) if failing.size >= least else None


def simulated_switch_overs(failures: list[dict[str, Any]], end_s: float) -> list[dict[str, Any]]:
    """The simulator's crashes (``fleet.json`` ``failures``) as switch-overs: crash → detection. A crash the
    router never detected failed whatever it was sent until the replica was ready again (or the end)."""
    result = []
    for f in failures:
        name = f"{f['pool']}/{f['replica']}"
        if f.get("switch_over_s") is not None:
            result.append({"target": name, "first_failure_s": f["at_s"], "taken_out_s": f["detected_at_s"],
                           "last_sent_s": f["detected_at_s"], "switch_over_s": f["switch_over_s"], "taken_out": True})  # fmt: skip
        else:
            result.append({"target": name, "first_failure_s": f["at_s"], "taken_out_s": None, "last_sent_s": None,
                           "switch_over_s": None, "failing_for_s": f.get("ready_at_s", end_s) - f["at_s"],
                           "taken_out": False})  # fmt: skip
    return result


def failover_block(switch_overs: list[dict[str, Any]], bound_s: float | None) -> dict[str, Any]:
    """The switch-overs, the worst of them (a target never taken out counts as long as it kept failing),
    and the verdict against ``bound_s`` (``None`` when the plan gives no bound)."""
    waits = [s["switch_over_s"] if s["taken_out"] else s["failing_for_s"] for s in switch_overs]
    worst = max(waits) if waits else None
    passed = None if bound_s is None else (worst is None or worst < bound_s)
    return {"bound_s": bound_s, "switch_overs": switch_overs, "worst_s": worst, "passed": passed}


def failover_threshold(block: dict[str, Any]) -> dict[str, Any] | None:
    """The bound as an entry of ``thresholds``, so that it is judged with the others (exit 1 when it fails)."""
    if block["bound_s"] is None:
        return None
    return {"expr": f"switch_over < {block['bound_s']:g}s", "metric": "switch_over", "observed": block["worst_s"],
            "passed": block["passed"], "abort_on_fail": False, "default": False}  # fmt: skip
