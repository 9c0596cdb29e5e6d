"""Bottleneck hints: a short reading of the client's and the server's signals together.

Each rule states what it saw, in numbers, and what usually explains it. The hints are
heuristics for where to look first, not verdicts.
"""

from __future__ import annotations

from typing import Any

from surgelab.telemetry.utilization import utilization

__all__ = ["diagnose", "attach_telemetry"]


def _role(summary: dict[str, Any], role: str) -> dict[str, Any] | None:
    return (summary.get("telemetry") or {}).get("roles", {}).get(role)


def _said(error: dict[str, Any]) -> str:
    """One failure group in words: its message (which names the HTTP status), else the state and status."""
    if error["message"]:
        return error["message"][:120]
    return error["state"] + (f" (HTTP {error['http_status']})" if error["http_status"] else "")


def diagnose(summary: dict[str, Any]) -> list[str]:
    hints: list[str] = []
    lag = summary["schedule_lag_ms"]
    validity = summary["validity"]
    if not validity["valid"] and lag.get("p99") is not None and lag["p99"] > validity["max_lag_p99_ms"]:
        culprit = _start_burst(validity) or _lag_culprit(summary.get("host_cpu"))
        hints.append(f"client schedule lag P99 {lag['p99']:.0f} ms: {culprit}")
    states = summary["requests"]["by_state"]
    failed = summary["requests"].get("unsuccessful", summary["requests"]["failed"])  # unanswered ones too
    if failed:
        kinds = ("http_error", "timeout", "connection_error", "protocol_error", "cancelled", "dropped", "lost")
        worst = max(kinds, key=lambda s: states.get(s, 0))
        top = (summary.get("errors") or [None])[0]
        said = f": {top['count']} × {_said(top)}" if top else ": look at the records' error column"
        hints.append(f"{failed} failed requests, mostly {worst} ({states[worst]}){said}")
    kv, waiting, running = _role(summary, "kv_usage"), _role(summary, "waiting"), _role(summary, "running")
    if kv and waiting and kv["max"] >= 0.95 and waiting["mean"] > 0.5:
        hints.append(
            f"KV cache at {kv['max']:.0%} and {waiting['mean']:.1f} requests waiting on average: memory-bound "
            "admission, not compute — shorter contexts, more KV memory (or replicas), or prefix caching"
        )
    elif running and waiting and running["max"] > 0 and waiting["mean"] > 0.5 and (kv is None or kv["max"] < 0.9):
        hints.append(
            f"{waiting['mean']:.1f} requests waiting while {running['max']:.0f} run at most and the KV cache has room: "
            "the running batch is capped (max_num_seqs or slots) — raise it or add replicas"
        )
    gpu = _role(summary, "gpu_util")
    if gpu and gpu["mean"] >= 90:
        hints.append(f"GPU utilisation {gpu['mean']:.0f}% on average: compute-bound; more GPUs or a smaller model")
    ttft = summary["latency_ms"]["ttft"]
    if ttft.get("p50") and ttft.get("p99") and ttft["p99"] > 5 * ttft["p50"] and not hints:
        hints.append(
            f"TTFT P99 is {ttft['p99'] / ttft['p50']:.1f}× its P50: requests queue at times — bursts or a batch "
            "that is full at the peaks"
        )
    conc = summary["concurrency"]
    if conc.get("mean_in_flight") and conc.get("littles_law_estimate"):
        ratio = conc["mean_in_flight"] / conc["littles_law_estimate"]
        if not 0.8 <= ratio <= 1.25:
            hints.append(
                f"mean in flight {conc['mean_in_flight']:.1f} vs Little's Law {conc['littles_law_estimate']:.1f}: "
                "the run never reached a steady state (a queue still growing, or a run too short for its latencies)"
            )
    return hints


def _start_burst(validity: dict[str, Any]) -> str | None:
    """The late sends are a closed loop's start, where every user sends at once, and the rest of the run kept
    its schedule (``analysis/start_burst.py``); a machine short of CPU makes sends late all through."""
    burst = validity.get("start_burst")
    if not burst or not burst["rest_on_time"]:
        return None
    phases = ", ".join(f"'{name}'" for name in burst["phases"])
    return (
        f"{burst['late_sends']} of the {validity['late_sends']} late sends fell in the first {burst['window_s']:g} s "
        f"of phase {phases}, where all {burst['users']:,} users start at once, and the rest of the run kept its "
        f"schedule ({burst['rest_late_sends']} of {burst['rest_sends']} late): the start burst fell behind, not the "
        f"machine — spread the users' start with --ramp-up {burst['suggested_ramp_up_s']}s (load.ramp_up)"
    )


def _lag_culprit(cpu: dict[str, Any] | None) -> str:
    """Why the client fell behind, from the run's CPU accounts (``runner/cpu.py``)."""
    if not cpu:
        return "the load generator could not keep up (its CPU use was not measured) — add workers or lower the rate"
    client, busy, cpus = cpu["client_cores"], cpu.get("machine_busy_cores"), cpu["cpus"]
    each = client / max(cpu.get("client_processes", 1), 1)  # one process uses one core at most
    used = f"surgelab used {client:.2f} of a core" + (f" in {cpu['client_processes']} processes" if each != client else "")
    if each >= 0.7:
        return f"the load generator is the bottleneck, not the server ({used}) — add workers or lower the rate"
    saturated, seconds = cpu.get("saturated_seconds") or 0, cpu.get("seconds")
    if busy is not None and (busy >= 0.85 * cpus or saturated):
        when = f"in {saturated} of {seconds} seconds" if seconds and busy < 0.85 * cpus else f"{busy:.1f} of {cpus} cores busy"
        return (
            f"the machine was saturated by other processes ({when}; {used}): the client was starved, not "
            "overloaded — give it a machine or a core of its own (a server on the same host competes for the CPU), "
            "or lower the rate"
        )
    machine = f"; {busy:.1f} of {cpus} cores busy on average" if busy is not None else ""
    busiest = f", {cpu['busiest_second_cores']:.1f} at the busiest second" if cpu.get("busiest_second_cores") else ""
    return (
        f"the client fell behind in short bursts without being short of CPU ({used}{machine}{busiest}): "
        "look at the lag over time in the report; more workers help only when the client's own CPU is the limit"
    )


def attach_telemetry(summary: dict[str, Any], block: dict[str, Any], capacity_rps: float | None = None) -> None:
    """Add the telemetry block, the utilisation (``telemetry.utilization``: with telemetry, or a declared
    capacity), and the diagnosis to a summary."""
    if block:
        summary["telemetry"] = block
    if block or capacity_rps is not None:
        summary["utilization"] = utilization(summary, block.get("roles", {}) if block else {}, capacity_rps)
    summary["diagnosis"] = diagnose(summary)
