"""Open loop: requests leave at their scheduled times, whatever the latency.

The whole schedule is computed before the phase starts. The loop sleeps until shortly before
the next intended time and starts every request due by then in one go; each is prepared and
then sent at its own intended time, and a late wake-up never shifts later requests (no
coordinated omission). A request that would exceed ``max_in_flight`` is
recorded as dropped, never delayed. An arrival of a class with sessions starts a whole
conversation, which counts as one in flight.

Dealt to ``users`` (inference-perf's sessions): request ``i`` belongs to user ``i mod users``,
who sends it at its time or, while its previous answer is still coming, the moment that
answer is back (its intended time then: the wait is the workload's, not the client's lag).
A user busy until the phase ends drops what it still holds. Workers split users, not
requests, so each user's requests stay in one process.
"""

from __future__ import annotations

import asyncio
from collections import deque

import numpy as np

from surgelab.load.identity import meta_for
from surgelab.load.phases import PhasePlan, open_loop_offsets
from surgelab.runner.conversation import converse
from surgelab.runner.execution import GRAIN_NS, LEAD_NS, Execution

__all__ = ["run_open_loop"]


async def run_open_loop(ex: Execution, plan: PhasePlan) -> None:
    load = plan.phase.load
    shard = ex.shard
    offsets = open_loop_offsets(ex.scenario, plan.index) + plan.start_ns
    every = np.arange(len(offsets))
    owner = every % load.users if load.users else every  # who sends it: a user, or the request itself
    indices = every[owner % shard.count == shard.index]  # this worker's share of the schedule
    offsets = offsets[indices]
    limit = shard.share(load.max_in_flight)
    in_flight = 0
    waiting: dict[int, deque[int]] = {}  # dealt to users: what each busy user has yet to send

    def done(_task: asyncio.Task) -> None:
        nonlocal in_flight
        in_flight -= 1

    async def user(u: int, i: int, intended: int) -> None:
        """User ``u`` sends request ``i``, then each request dealt to it meanwhile as its answer comes back."""
        await converse(ex, plan, i, intended, u)
        queue = waiting[u]
        while queue and not ex.stop.requested and ex.clock() < plan.end_ns:
            i = queue.popleft()
            await converse(ex, plan, i, ex.clock(), u)
        for i in queue:
            ex.drop(meta_for(plan, i, plan.sampler.spec(i), ex.clock(), u),
                    "its user was still waiting for an answer when the phase ended")  # fmt: skip
        del waiting[u]

    j, n = 0, len(offsets)
    while j < n and not ex.stop.requested:
        # Up to a timer grain early: each request waits for its own time precisely anyway,
        # and sub-millisecond sleeps would make this loop spin at high rates.
        if not await ex.sleep_until(int(offsets[j]) - LEAD_NS, early_ns=GRAIN_NS):
            break
        soon = ex.clock() + LEAD_NS + GRAIN_NS
        while j < n and offsets[j] <= soon:  # everything due within the lead, at once
            intended, i = int(offsets[j]), int(indices[j])
            u = i % load.users if load.users else -1
            if u in waiting:
                waiting[u].append(i)  # sent once the user's answer is back
            elif in_flight >= limit:
                ex.drop(
                    meta_for(plan, i, plan.sampler.spec(i), intended, -1),
                    f"max_in_flight ({load.max_in_flight}) reached",
                )
            elif u >= 0:
                in_flight += 1
                waiting[u] = deque()
                ex.spawn(user(u, i, intended)).add_done_callback(done)
            else:
                in_flight += 1
                ex.spawn(converse(ex, plan, i, intended)).add_done_callback(done)
            j += 1
        await asyncio.sleep(0)
