"""What ``surgelab validate`` prints beyond "ok": every target's settings as they resolved.

With ``targets:``, each entry inherits the top-level ``target:`` settings it does not give itself;
seeing the resolved values (a 5 s first-token timeout, and not the 60 s default) is how a user
knows the file says what they meant. The failover line says how long a hung target takes to be
taken out, and warns when checks alone cannot meet the plan's ``max_switch_over``.
"""

from __future__ import annotations

from surgelab.redact import redact_url
from surgelab.scenario.model import Scenario
from surgelab.scenario.target import Target
from surgelab.units import format_duration

__all__ = ["resolved_lines"]


def resolved_lines(scenario: Scenario) -> list[str]:
    """One line per target (timeouts, retry), and the health checks and switch-over bound when routing."""
    if not scenario.targets:
        return [f"target: {_settings(scenario.target)}"]
    lines = [
        f"target {t.name}: {redact_url(t.base_url)}, weight {t.weight:g} — {_settings(t)}" for t in scenario.targets
    ]
    if scenario.routing.mode != "route":
        return lines
    h = scenario.routing.health
    bound = (
        format_duration(h.max_switch_over) if h.max_switch_over is not None else "none (routing.health.max_switch_over)"
    )
    fastest, slowest = h.checks_take_out_s()
    lines.append(
        f"health checks: GET {h.path} every {format_duration(h.interval)}, timeout {format_duration(h.timeout)}; "
        f"out after {h.failures} consecutive failures (checks or requests), back after {h.recovery} passing checks; "
        f"failover {'on' if scenario.routing.failover else 'off'}; switch-over bound {bound}"
    )
    if h.max_switch_over is not None and slowest >= h.max_switch_over:
        first_token = min(t.timeouts.first_token for t in scenario.targets)
        lines.append(
            f"warning: checks alone take {format_duration(fastest)}–{format_duration(slowest)} to take out a target "
            f"that hangs ({h.failures} failed checks {format_duration(h.interval)} apart), not under the "
            f"{format_duration(h.max_switch_over)} bound: only its requests failing sooner can (the shortest "
            f"first-token timeout is {format_duration(first_token)})"
        )
    return lines


def _settings(t: Target) -> str:
    timeouts = t.timeouts
    retry = "off" if t.retry is None else f"up to {t.retry.max_attempts} attempts on {', '.join(map(str, t.retry.on))}"
    return (
        f"model {t.model or '(the only one it serves)'}; timeouts: connect {format_duration(timeouts.connect)}, "
        f"first token {format_duration(timeouts.first_token)}, total {format_duration(timeouts.total)}; retry {retry}"
    )
