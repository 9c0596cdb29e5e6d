"""The run's verdict in one line, cause first: what a reader sees before any table.

"FAIL: 11 of 15 requests never answered (cancelled when the grace ran out, 10s after the
planned end) · error_rate < 10% failed (observed 73.3 %)" tells what happened; a table that
starts with "error rate 0.00 %" and ends in "✓ pass" told the opposite of a hung server.
"""

from __future__ import annotations

from typing import Any

__all__ = ["headline", "unanswered_cause", "observed_text"]

_CAUSES = 2  # failure groups named after the unanswered ones


def unanswered_cause(grace_s: float, stop_reason: str) -> str:
    """Why requests were cancelled unanswered, in words (the grace that ran out, and after what)."""
    after = "the planned end" if stop_reason in ("completed", "unknown") else f"the run stopped ({stop_reason})"
    return f"cancelled when the grace ran out, {grace_s:g}s after {after}; load.grace"


def headline(summary: dict[str, Any], grace_s: float) -> str | None:
    """``FAIL: …`` when a threshold or bound failed or a guard stopped the run, ``WARNING: …`` when
    requests went unanswered in a run that passed anyway, else None."""
    req = summary["requests"]
    causes = []
    if req["unanswered"]:
        causes.append(
            f"{req['unanswered']} of {req['measured']} requests never answered "
            f"({unanswered_cause(grace_s, summary['stop_reason'])})"
        )
    failed = [t for t in summary["thresholds"] if not t["passed"]]
    stop = summary["stop_reason"]
    if failed or stop.startswith("aborted"):
        others = [e for e in summary.get("errors") or [] if e["state"] != "cancelled"][:_CAUSES]
        causes += [f"{e['count']:,} × {e['state']}: {e['message'] or 'no message'}" for e in others]
        causes += [f"{t['expr']} failed (observed {observed_text(t)})" for t in failed]
        if stop.startswith("aborted"):
            causes.insert(0, stop)
        return "FAIL: " + " · ".join(causes)
    return "WARNING: " + " · ".join(causes) if causes else None


def observed_text(t: dict[str, Any]) -> str:
    """A threshold's observed value in its unit (ms for latencies, % for ratios)."""
    value = t["observed"]
    if value is None:
        return "no target failed" if t["metric"] == "switch_over" else "no data"
    if "(" in t["metric"]:
        return f"{value * 1000:,.1f} ms"
    if t["metric"] == "switch_over":
        return f"{value:,.1f} s"
    if t["metric"] == "ok":
        return f"{value:,}"
    if t["metric"] in ("error_rate", "drop_rate"):
        return f"{value:.3%}"
    return f"{value:,.2f}"
