"""The live router's health checks against a server that hangs (issue 29).

Seen before: checks of every target ran together and then slept the interval, so a hung
target's timed-out check pushed every next check a timeout later; with the seed's settings a hung
primary was still in the routing 45 s after it hung. Each target now has its own fixed cadence.
"""

from __future__ import annotations

import asyncio
import time

from surgelab.client.routing import Router
from surgelab.scenario.model import Health, NamedTarget
from surgelab.server.process import ServerProcess


def _checks_for(router: Router, seconds: float) -> None:
    async def main() -> None:
        task = asyncio.create_task(router.check_forever())
        await asyncio.sleep(seconds)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(main())


def test_a_hung_targets_checks_time_out_on_their_cadence_and_take_it_out() -> None:
    with ServerProcess(["--stall-after", "0.5s"]) as hung, ServerProcess() as healthy:
        time.sleep(1.0)  # stalled by now
        targets = [NamedTarget(name="hung", url=hung.base_url, model="m"),
                   NamedTarget(name="healthy", url=healthy.base_url, model="m")]  # fmt: skip
        t0 = time.perf_counter_ns()
        router = Router(
            targets, Health(interval=0.5, timeout=0.5, failures=3), True, lambda: time.perf_counter_ns() - t0
        )
        _checks_for(router, 2.2)
    [down] = router.events
    assert (down.target, down.event, down.reason) == ("hung", "down", "check: TimeoutError")
    # checks start at 0, 0.5 and 1.0 s and each times out 0.5 s later: out at 1.5 s (was 2.5 s: a check every interval + timeout)
    assert 1.4 < down.t_s < 2.0, down
    assert down.first_failure_s is not None and down.first_failure_s < 0.1, (
        "the failing streak began with the first check"
    )
    assert router.state["healthy"].up and router.state["healthy"].health.failures == 0
