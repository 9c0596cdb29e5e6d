"""Which failed requests the router counts as lost around a failover (no network: outcomes are fed in)."""

from __future__ import annotations

from surgelab.client.routing import Router
from surgelab.scenario.model import Health, NamedTarget


def _router(failures: int = 2) -> Router:
    targets = [NamedTarget(name="primary", url="http://127.0.0.1:1/v1", model="m", weight=80), NamedTarget(name="backup", url="http://127.0.0.1:2/v1", model="m", weight=20)]
    return Router(targets, health=Health(failures=failures), failover=True, clock=lambda: 0)


def test_the_request_that_starts_a_streak_which_takes_the_target_out_is_lost() -> None:
    # Seen in CI: one request failed after the crash, then a health check took the target out,
    # and the report said 0 requests were lost around the failover.
    router = _router()
    router.observe("primary", ok=False, error="ServerDisconnected")
    router._failure("primary", "check: ClientConnectorError", 0.0)
    router.observe("primary", ok=False, error="in flight when it went down")
    stats = router.report()["targets"]["primary"]
    assert (stats["up_at_end"], stats["failed"], stats["lost_around_failover"]) == (False, 2, 2)


def test_a_failure_that_does_not_take_the_target_out_is_not_lost_around_a_failover() -> None:
    router = _router(failures=3)
    router.observe("primary", ok=False, error="HTTP 500")
    router.observe("primary", ok=False, error="HTTP 500")
    router.observe("primary", ok=True)
    router.observe("primary", ok=False, error="HTTP 500")
    stats = router.report()["targets"]["primary"]
    assert (stats["up_at_end"], stats["failed"], stats["lost_around_failover"]) == (True, 3, 0)
    assert router.events == []


def test_with_one_failure_allowed_the_failing_request_itself_is_lost() -> None:
    router = _router(failures=1)
    router.observe("primary", ok=False, error="refused")
    assert router.report()["targets"]["primary"]["lost_around_failover"] == 1
