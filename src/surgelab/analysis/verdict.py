"""The run's verdict in one line, cause first: what a reader sees before any table.

"FAIL: 11 of 15 requests never answered (cancelled when the grace ran out, 10s after the
planned end) · error_rate < 10% failed (observed 73.3 %)" tells what happened; a table that
starts with "error rate 0.00 %" and ends in "✓ pass" told the opposite of a hung server.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "headline", "unanswered_cause", "observed_text", "run_exit_code", "run_verdict", "bound_text", "sweep_verdict", "banner",
    "EXIT_OK", "EXIT_THRESHOLDS", "EXIT_INVALID", "EXIT_INTERRUPTED",
]  # fmt: skip

_CAUSES = 2  # failure groups named after the unanswered ones
EXIT_OK, EXIT_THRESHOLDS, EXIT_INVALID, EXIT_INTERRUPTED = 0, 1, 3, 130


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


def run_exit_code(thresholds_passed: bool, stop_reason: str, valid: bool) -> int:
    """``surgelab run``'s exit status: a failed bound or a guard's abort 1, an interrupt 130, an invalid run 3."""
    if not thresholds_passed or stop_reason.startswith("aborted: guard"):
        return EXIT_THRESHOLDS
    if stop_reason.startswith("interrupted"):
        return EXIT_INTERRUPTED
    return EXIT_OK if valid else EXIT_INVALID


def bound_text(t: dict[str, Any]) -> str:
    """A threshold as a reader needs it: ``error_rate < 10% (default) failed: observed 73.000%``."""
    said = "passed" if t["passed"] else "failed"
    return f"{t['expr']}{' (default)' if t.get('default') else ''} {said}: observed {observed_text(t)}"


def run_verdict(summary: dict[str, Any], *, simulated: bool = False) -> dict[str, Any]:
    """The verdict every page opens with: PASS / FAIL / INVALID / INTERRUPTED, the exit status the command
    gave, the stop reason, and the first failing bound with its observed value (a default one said so).

    A simulation is judged the same way, but ``surgelab simulate`` itself always exits 0.
    """
    stop = summary.get("stop_reason", "")
    validity = summary.get("validity") or {"valid": True, "reasons": []}
    thresholds = summary.get("thresholds") or []
    failed = [bound_text(t) for t in thresholds if not t["passed"]]
    code = run_exit_code(not failed, stop, validity["valid"])
    word = {EXIT_OK: "PASS", EXIT_THRESHOLDS: "FAIL", EXIT_INVALID: "INVALID", EXIT_INTERRUPTED: "INTERRUPTED"}[code]
    bounds = [{"expr": t["expr"] + (" (default)" if t.get("default") else ""), "observed": observed_text(t),
               "passed": t["passed"]} for t in thresholds]  # fmt: skip
    return banner(word, 0 if simulated else code, "surgelab simulate" if simulated else "surgelab run", stop,
                  failed or ([stop] if stop.startswith("aborted") else []), list(validity.get("reasons", [])),
                  summary.get("headline"), bounds)  # fmt: skip


def banner(word: str, exit_code: int, command: str, stop_reason: str, failures: list[str] | None = None,
           invalid: list[str] | None = None, headline: str | None = None, bounds: list[dict[str, Any]] | None = None,
           ) -> dict[str, Any]:  # fmt: skip
    """The banner's model, one shape for every page (``slVerdict`` in the page draws it)."""
    failures = failures or []
    return {"word": word, "exit_code": exit_code, "command": command, "stop_reason": stop_reason,
            "first_failure": failures[0] if failures else None, "failures": failures, "invalid": invalid or [],
            "headline": headline, "bounds": bounds or [], "notes": []}  # fmt: skip


def sweep_verdict(capacity: str | None, objective: str, invalid: list[str], stop_reason: str) -> dict[str, Any]:
    """A sweep's banner: PASS with its SLA capacity, FAIL when no level met ``objective``, INVALID when a
    level's client distorted its load. ``surgelab sweep`` exits 0 either way (130 when interrupted)."""
    code = EXIT_INTERRUPTED if stop_reason.startswith("interrupted") else EXIT_OK
    word = "INTERRUPTED" if code else "FAIL" if capacity is None else "INVALID" if invalid else "PASS"
    return banner(word, code, "surgelab sweep", stop_reason, [f"no level met {objective}"] if capacity is None else [],
                  invalid, capacity)  # fmt: skip
