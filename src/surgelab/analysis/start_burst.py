"""Late sends at the start of a closed loop whose users all start at once.

With ``load.ramp_up`` 0 every user of a steady closed loop sends its first request at the
phase's start: 2,000 users are 2,000 sends (and connections) intended for the same instant,
and the client works through them for a while. Their lag is real, but when the rest of the
run keeps its schedule it says that the start was a burst, not that the machine is short of
CPU: the fix is to spread the users' start (``--ramp-up``), not another machine. A machine
that is really loaded makes sends late all through the run, and then this is not the reading.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np

from surgelab.scenario.model import Scenario

__all__ = ["START_BURST_S", "start_burst"]

START_BURST_S = 5.0  # the start of such a phase: this long, or a quarter of the phase if that is shorter


class _Columns(Protocol):
    phase: Any
    intended: np.ndarray
    sent: np.ndarray


def start_burst(c: _Columns, rows: np.ndarray, bound_s: float, scenario: Scenario) -> dict[str, Any] | None:
    """The late sends (later than ``bound_s``) among ``rows`` at the start of every steady closed-loop
    phase without a ramp-up; ``None`` when there are none.

    ``rest_on_time`` says whether the sends after those starts would have made a valid run by the
    same rules (``validity.max_late_share`` and ``min_late_sends``). ``suggested_ramp_up_s`` lets the
    users join at half the send rate the run kept after its start: joining users and those already
    cycling then ask about that rate of the client together."""
    sent = rows & ~np.isnan(c.sent)
    late = sent & (c.sent - c.intended > bound_s)
    at_start = np.zeros_like(sent)
    phases, users, rate, windows = [], 0, 0.0, []
    for phase in scenario.phase_list:
        load = phase.load
        if load.mode != "closed" or not load.shape.constant or load.ramp_up or load.shape.peak < 2:
            continue
        own = c.phase == phase.name
        if not (sent & own).any():
            continue
        start = float(c.intended[own].min())  # every user's first send is intended at the phase's start
        windows.append(min(START_BURST_S, load.planned_duration / 4))
        early = own & (c.intended < start + windows[-1])
        at_start |= early
        phases.append(phase.name)
        users += math.ceil(load.shape.peak)
        after = sent & own & ~early
        span = float(c.intended[after].max() - c.intended[after].min()) if after.sum() >= 2 else 0.0
        rate = max(rate, after.sum() / span) if span > 0 else rate
    n_late = int(np.sum(late & at_start))
    if not n_late:
        return None
    rules = scenario.validity
    rest_late, rest_sent = int(np.sum(late & ~at_start)), int(np.sum(sent & ~at_start))
    rest_on_time = rest_sent > 0 and (rest_late < rules.min_late_sends or rest_late / rest_sent <= rules.max_late_share)
    return {"phases": phases, "users": users, "window_s": max(windows), "late_sends": n_late,
            "rest_late_sends": rest_late, "rest_sends": rest_sent, "rest_on_time": rest_on_time,
            "suggested_ramp_up_s": max(math.ceil(2 * users / rate) if rate else 1, 1)}  # fmt: skip
