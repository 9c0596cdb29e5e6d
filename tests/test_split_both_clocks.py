"""A weighted split deals the same sequence live and simulated (issue 31: live drew at random, the
simulator dealt smooth round robin, so an 80/20 plan split differently in the two)."""

from __future__ import annotations

from types import SimpleNamespace

from surgelab.client.routing import Router
from surgelab.scenario.model import Health, NamedTarget
from surgelab.sim.fleet import Router as RouterConfig
from surgelab.sim.replica import READY
from surgelab.sim.router import RouterRuntime


def _live(weights: list[float]) -> Router:
    targets = [
        NamedTarget(name=f"t{i}", url=f"http://127.0.0.1:{i + 1}/v1", model="m", weight=w)
        for i, w in enumerate(weights)
    ]
    return Router(targets, Health(), failover=True, clock=lambda: 0)


class _Replica:
    """A simulated replica that always has room (what ``_least`` and ``routable`` read)."""

    outstanding: list = []
    router_up, state, limit = True, READY, None

    def routable(self) -> bool:
        return True


def _simulated(weights: list[float]) -> RouterRuntime:
    pools = [SimpleNamespace(cfg=SimpleNamespace(weight=w), replicas=[_Replica()], region=None, name=f"t{i}")
             for i, w in enumerate(weights)]  # fmt: skip
    runtime = RouterRuntime(RouterConfig(policy="weighted"), pools)  # type: ignore[arg-type]
    for pool in pools:
        pool.replicas[0].pool = pool
    return runtime


def test_an_80_20_split_is_exact_over_every_ten_requests_live() -> None:
    router = _live([80, 20])
    picks = [router.pick(i) for i in range(1000)]
    for start in range(0, 1000, 10):
        assert picks[start : start + 10].count("t1") == 2, picks[start : start + 10]


def test_live_and_simulated_splits_are_the_same_sequence() -> None:
    for weights in ([80, 20], [3, 2, 1], [0.5, 0.25, 0.25], [1, 0, 1]):
        live = _live(weights)
        sim = _simulated(weights)
        live_picks = [live.pick(i) for i in range(200)]
        sim_picks = [sim.pick().pool.name for _ in range(200)]
        assert live_picks == sim_picks, weights


def test_a_down_target_share_goes_to_the_others_and_counts_as_rerouted() -> None:
    router = _live([80, 20])
    for _ in range(3):
        router.observe("t0", ok=False, error="refused")
    assert not router.state["t0"].up
    picks = [router.pick(i) for i in range(100)]
    assert picks == ["t1"] * 100
    assert router.state["t1"].rerouted == 80  # the requests whose turn was t0's
