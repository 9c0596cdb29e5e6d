"""Open loop: requests leave at their scheduled times, whatever the latency.

The whole schedule is computed before the phase starts. The loop sleeps until shortly before
the next intended time and starts every request due by then in one go; each is prepared and
then sent at its own intended time, and a late wake-up never shifts later requests (no
coordinated omission). A request that would exceed ``max_in_flight`` is
recorded as dropped, never delayed. An arrival of a class with sessions starts a whole
conversation, which counts as one in flight.
"""

from __future__ import annotations

import asyncio

import numpy as np

from surgelab.load.phases import PhasePlan, open_loop_offsets
from surgelab.runner.conversation import converse, meta_for
from surgelab.runner.execution import GRAIN_NS, LEAD_NS, Execution

__all__ = ["run_open_loop"]


async def run_open_loop(ex: Execution, plan: PhasePlan) -> None:
    load = plan.phase.load
    shard = ex.shard
    offsets = open_loop_offsets(ex.scenario, plan.index) + plan.start_ns
    indices = np.arange(shard.index, len(offsets), shard.count)  # this worker's share of the schedule
    offsets = offsets[indices]
    limit = shard.share(load.max_in_flight)
    in_flight = 0

    def done(_task: asyncio.Task) -> None:
        nonlocal in_flight
        in_flight -= 1

    j, n = 0, len(offsets)
    while j < n and not ex.stop.requested:
        # Up to a timer grain early: each request waits for its own time precisely anyway,
        # and sub-millisecond sleeps would make this loop spin at high rates.
        if not await ex.sleep_until(int(offsets[j]) - LEAD_NS, early_ns=GRAIN_NS):
            break
        soon = ex.clock() + LEAD_NS + GRAIN_NS
        while j < n and offsets[j] <= soon:  # everything due within the lead, at once
            intended, i = int(offsets[j]), int(indices[j])
            if in_flight >= limit:
                ex.drop(
                    meta_for(plan, i, plan.sampler.spec(i), intended, -1),
                    f"max_in_flight ({load.max_in_flight}) reached",
                )
            else:
                in_flight += 1
                ex.spawn(converse(ex, plan, i, intended)).add_done_callback(done)
            j += 1
        await asyncio.sleep(0)
