"""Closed loop: virtual users who send, wait for the answer, think, and send again.

A user's intended send time is the moment it became ready (after its think time), so a
client that cannot keep up shows as schedule lag. With a shaped ``concurrency`` user ``u``
is active while ``u < level(t)``; a user above the level finishes its request and waits
(k6's graceful ramp-down). With ``workload.assign: user`` each user draws one class (its
profile) from the weights and keeps it, with that profile's think time.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from surgelab.load.phases import PhasePlan
from surgelab.runner.conversation import converse
from surgelab.runner.execution import LEAD_NS, MAX_NAP_S, Execution
from surgelab.units import SECOND

__all__ = ["run_closed_loop"]


async def run_closed_loop(ex: Execution, plan: PhasePlan) -> None:
    load = plan.phase.load
    users = math.ceil(load.shape.peak)
    shard = ex.shard
    issue_order = itertools.count(shard.index, shard.count)  # ids of different workers never meet
    for user in range(shard.index, users, shard.count):
        ex.spawn(_user(ex, plan, user, users, issue_order))


async def _user(ex: Execution, plan: PhasePlan, user: int, users: int, issue_order: itertools.count) -> None:
    load = plan.phase.load
    rng = np.random.default_rng([ex.scenario.seed, 20, plan.index, user])
    profile = None  # workload.assign: user — this user's class for the whole run
    think_time = load.think_time
    if ex.scenario.workload_of(plan.phase).assign == "user" and hasattr(plan.sampler, "profile"):
        profile = plan.sampler.profile([ex.scenario.seed, 21, plan.index, user])
        think_time = profile.cls.think_time or load.think_time
    ready = plan.user_ready_ns(user, users)
    while not ex.stop.requested and ready < plan.end_ns:
        if not await ex.sleep_until(ready - LEAD_NS):
            return
        if not plan.user_active(user, max(ex.clock(), ready)):
            ready = ex.clock() + int(MAX_NAP_S * SECOND)  # not active now: look again shortly
            continue
        await converse(ex, plan, next(issue_order), ready, user, profile)
        think = float(think_time.sample(rng, 1)[0])
        ready = ex.clock() + int(think * SECOND)
