"""A latency-curve replica (seed 002's toy service): each request's latency is set at its admission
by the requests the replica holds then, as the seed's latency(c); bad curves are one-line errors."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from surgelab.sim import FleetError, load_fleet
from surgelab.sim.loader import build_fleet

from .helpers import run, scenario

TOY = Path(__file__).parents[2] / "examples" / "fleets" / "seed002-toy.yaml"


class SeedService:
    """Seed 002's InferenceService, as the seed writes it (gpu_mem 16, mem_per_req 0.2, base 0.05)."""

    gpu_mem, mem_per_req, base_latency = 16.0, 0.2, 0.05

    def max_concurrency(self) -> int:
        return int(self.gpu_mem / self.mem_per_req)

    def latency(self, concurrency: int) -> float:
        cap = self.max_concurrency()
        if concurrency <= cap:
            return max(self.base_latency / math.log2(concurrency + 1), 0.005)
        return self.base_latency * (1 + 3 * (concurrency / cap - 1) ** 2)

    def error_rate(self, concurrency: int) -> float:
        cap = self.max_concurrency()
        if concurrency <= cap * 1.2:
            return 0.0
        return min((concurrency - cap * 1.2) / cap, 0.5)


def test_the_toy_fleet_is_the_seeds_formula_at_every_concurrency() -> None:
    curve = load_fleet(TOY).pools[0].latency_curve
    seed = SeedService()
    assert curve is not None and curve.slots == seed.max_concurrency() == 80
    for c in range(1, 301):
        assert curve.latency(c) == pytest.approx(seed.latency(c), rel=1e-12), c
        assert curve.error_rate(c) == pytest.approx(seed.error_rate(c), abs=1e-12), c


def _e2e_ns(run_dir: Path) -> list[tuple[int, int, int, str]]:
    t = pq.read_table(run_dir / "records.parquet", columns=["user", "sent_ns", "end_ns", "state"]).to_pylist()
    return sorted((r["user"], r["sent_ns"], r["end_ns"] - r["sent_ns"], r["state"]) for r in t)


def test_a_steady_closed_loop_of_c_users_takes_the_seeds_latency_of_c(tmp_path) -> None:
    # 40 users at once, no think time: every request is admitted with 40 held, all take latency(40)
    flt = load_fleet(TOY)
    result = run(tmp_path, scenario({"concurrency": 40, "duration": "0.5s"}), flt)
    records = _e2e_ns(result.run_dir)
    assert len(records) > 40 * 50
    assert {e2e for _, _, e2e, _ in records} == {round(SeedService().latency(40) * 1e9)}


def test_latency_is_fixed_at_admission_from_the_requests_held_then(tmp_path) -> None:
    # user 0 starts alone at 0 (latency(1) = 50 ms); user 1 at 25 ms finds 2 held (31.5 ms each);
    # user 0's first request keeps its 50 ms: a later arrival does not change it
    flt = load_fleet(TOY)
    result = run(tmp_path, scenario({"concurrency": 2, "ramp_up": "50ms", "duration": "0.2s"}), flt)
    records = _e2e_ns(result.run_dir)
    seed = SeedService()
    first = {user: next(r for r in records if r[0] == user) for user in (0, 1)}
    assert first[0][1] == 0 and first[0][2] == round(seed.latency(1) * 1e9)
    assert first[1][1] == 25_000_000 and first[1][2] == round(seed.latency(2) * 1e9)
    assert all(e2e == round(seed.latency(2) * 1e9) for user, sent, e2e, _ in records if sent > 0 and user == 0)


def test_past_the_error_threshold_the_seeds_share_fails(tmp_path) -> None:
    # 120 users: 120 > 1.2 × 80, (120 − 96) ÷ 80 = 30 % of the requests end as HTTP 503
    result = run(tmp_path, scenario({"concurrency": 120, "duration": "0.875s"}), load_fleet(TOY))
    records = _e2e_ns(result.run_dir)
    assert len(records) == 120 * 10  # ten rounds of 87.5 ms
    failed = sum(1 for r in records if r[3] != "ok")
    assert failed == 120 * 10 * 3 // 10
    assert {e2e for _, _, e2e, _ in records} == {round(SeedService().latency(120) * 1e9)}


@pytest.mark.parametrize(
    ("curve", "expected"),
    [
        (
            {"base_latency": "50ms", "gpu_memory": 16, "memory_per_request": 0},
            "latency_curve.memory_per_request: Input should be greater than 0",
        ),
        ({"base_latency": "50ms", "gpu_memory": 0.1, "memory_per_request": 0.2}, "holds no request"),
        ({"base_latency": "50ms", "capacity": 80, "gpu_memory": 16, "memory_per_request": 0.2}, "not both"),
        ({"base_latency": "50ms"}, "give capacity, or both gpu_memory and memory_per_request"),
        ({"base_latency": "0s", "capacity": 80}, "base_latency"),
        ({"base_latency": "50ms", "capacity": 80, "speedup": "log3"}, "speedup"),
        ({"base_latency": "50ms", "capacity": 80, "max_error_rate": 1.5}, "max_error_rate"),
    ],
)
def test_a_bad_curve_is_a_one_line_error_with_its_line(curve: dict, expected: str) -> None:
    with pytest.raises(FleetError) as err:
        build_fleet({"pools": [{"latency_curve": curve}]}, source="toy.yaml")
    (message,) = err.value.messages
    assert message.startswith("toy.yaml:1: pools[0].latency_curve") and expected in message
    assert "\n" not in message


def test_a_curve_is_instead_of_an_engine_not_beside_one() -> None:
    with pytest.raises(FleetError) as err:
        build_fleet({"pools": [{"profile": "tiny", "latency_curve": {"base_latency": 0.05, "capacity": 8}}]})
    assert "exactly one of profile (engine), service_time (queueing model) or latency_curve" in err.value.messages[0]


def test_a_crash_loses_what_the_curve_holds_and_the_restarted_replica_serves_again(tmp_path) -> None:
    flt = build_fleet({"pools": [{"latency_curve": {"base_latency": "50ms", "capacity": 8},
                                  "failures": {"crashes": [{"at": "0.1s"}], "recovery": "0.2s"}}]})  # fmt: skip
    result = run(tmp_path, scenario({"concurrency": 4, "duration": "1s"}), flt)
    records = _e2e_ns(result.run_dir)
    lost = [r for r in records if r[3] == "connection_error"]
    assert (
        len(lost) >= 4 and records[-1][3] == "ok"
    )  # the four held at the crash, then refused ones; served again after
    assert {e2e for _, sent, e2e, state in records if state == "ok" and sent > 300_000_000} == {
        round(0.05 / math.log2(5) * 1e9)
    }
