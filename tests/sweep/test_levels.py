"""Level ladders, adaptive refinement, stop rules and the SLA capacity on hand-made level rows."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from surgelab.conditions import Threshold
from surgelab.scenario.model import Slo
from surgelab.sweep.capacity import observe, sla_capacity, slo_thresholds, stop_reason
from surgelab.sweep.config import StopRules, SweepConfig
from surgelab.sweep.levels import ladder, refinement
from surgelab.sweep.result import LevelRow, SweepResult, read_sweep, write_sweep


def row(i, offered, rps, ttft_p99=50.0, errors=0.0):
    lat = {m: {"mean": 10.0, "p50": 10.0, "p90": 20.0, "p95": 30.0, "p99": 40.0} for m in ("itl", "tpot", "e2e")}
    lat["ttft"] = {"mean": ttft_p99 / 2, "p50": ttft_p99 / 2, "p90": ttft_p99, "p95": ttft_p99, "p99": ttft_p99}
    return LevelRow(
        i, offered, f"level-{i:02d}", "climb", offered, rps, rps * 32, rps, errors, offered, 100, True, [], lat
    )


def test_ladders():
    assert ladder(SweepConfig(spacing="linear", start=2, step=3, max=12)) == [2, 5, 8, 11]
    assert ladder(SweepConfig(spacing="geometric", start=1, factor=2, max=20)) == [1, 2, 4, 8, 16]
    assert ladder(SweepConfig(spacing="geometric", start=1, factor=1.5, max=6)) == [
        1,
        2,
        3,
        5,
    ]  # whole users, no repeats
    assert ladder(SweepConfig(mode="rate", start=0.5, factor=2, max=4)) == [0.5, 1, 2, 4]
    assert ladder(SweepConfig(levels=[8, 1, 4, 4], max_levels=2)) == [1, 4]


def test_adaptive_refinement_spreads_between_the_knee_neighbours():
    config = SweepConfig(spacing="adaptive", refine=3)
    assert refinement([1, 2, 4, 8, 16, 32], 8, config, budget=10) == [7, 10, 13]
    assert refinement([1, 2, 4, 8, 16], 8, config, budget=2) == [7, 10]
    assert refinement([1, 2, 4], None, config, budget=5) == []
    assert refinement([4, 5, 6], 5, config, budget=5) == []  # nothing left between 4 and 6
    rate = SweepConfig(mode="rate", spacing="adaptive", refine=1)
    assert refinement([5.0, 10.0, 20.0], 10.0, rate, budget=5) == [12.5]


def test_config_problems():
    with pytest.raises(ValidationError, match="max"):
        SweepConfig(start=10, max=5)
    with pytest.raises(ValidationError, match="whole numbers"):
        SweepConfig(levels=[1.5, 3])
    with pytest.raises(ValidationError):
        SweepConfig(hold=0)


def test_stop_on_errors_slo_multiple_conditions_and_falling_throughput():
    rules = StopRules(max_error_rate=0.05, slo_multiple=3, falling_levels=2)
    bounds = slo_thresholds(Slo(ttft=0.1))
    assert stop_reason([row(0, 1, 10), row(1, 2, 20)], rules, bounds) is None
    assert "error rate 6.0%" in stop_reason([row(0, 1, 10, errors=0.06)], rules, bounds)
    assert "p99(ttft) 310 ms > 3 × SLO (100 ms)" in stop_reason([row(0, 1, 10, ttft_p99=310)], rules, bounds)
    assert stop_reason([row(0, 1, 10, ttft_p99=290)], rules, bounds) is None
    falling = [row(0, 4, 50), row(1, 8, 45), row(2, 16, 40)]
    assert "fell 2 levels in a row" in stop_reason(falling, rules, bounds)
    assert stop_reason([row(0, 4, 50), row(1, 8, 49.5), row(2, 16, 49)], rules, bounds) is None  # within 2 % noise
    extra = StopRules(stop_when=[Threshold(expr="p99(e2e) > 30ms")])
    assert "'p99(e2e) > 30ms' held at 1" in stop_reason([row(0, 1, 10)], extra, [])


def test_sla_capacity_is_the_highest_level_meeting_every_slo():
    rows = [row(0, 1, 10, 40), row(1, 2, 20, 60), row(2, 4, 38, 90), row(3, 8, 45, 300), row(4, 16, 44, 900)]
    cap = sla_capacity(rows, slo_thresholds(Slo(ttft=0.1)), 0.01)
    assert cap is not None and cap["level"] == 4 and cap["requests_per_s"] == 38
    assert cap["slo"] == ["p99(ttft) <= 100ms"]
    rows[2] = row(2, 4, 38, 90, errors=0.02)
    assert sla_capacity(rows, slo_thresholds(Slo(ttft=0.1)), 0.01)["level"] == 2
    assert sla_capacity(rows, slo_thresholds(Slo(ttft=0.01)), 0.01) is None
    assert observe(Threshold(expr="p90(ttft) < 1s"), rows[0]) == pytest.approx(0.04)


def test_sweep_json_round_trip_and_bad_files(tmp_path):
    result = SweepResult("s", "concurrency", "users", {}, {}, [], [row(0, 1, 10), row(1, 2, 20)], "completed")
    write_sweep(result, tmp_path)
    back = read_sweep(tmp_path)
    assert back.levels == result.levels and back.stop_reason == "completed"
    assert (tmp_path / "sweep.parquet").exists()
    (tmp_path / "bad.json").write_text("{}")
    for path, message in ((tmp_path / "missing.json", "not found"), (tmp_path / "bad.json", "schema version")):
        with pytest.raises(ValueError, match=message):
            read_sweep(path)


def test_batch_speedup_is_the_seeds_ratio_and_sits_beside_the_throughput_gain():
    # Seed 002's toy service: latency(c) = 0.05 s ÷ log2(c + 1) up to 80 concurrent, so its batch
    # speedup (single-request latency ÷ latency at the level) is log2(c + 1), 6.34 at 80.
    import math

    def latency_ms(c):
        return max(50 / math.log2(c + 1), 5.0)

    rows = []
    for i, c in enumerate([1, 10, 40, 80]):
        r = row(i, c, c / latency_ms(c) * 1000)
        r.latency_ms["e2e"]["p50"] = latency_ms(c)
        rows.append(r)
    result = SweepResult("toy", "concurrency", "users", {}, {}, [], rows[::-1], "")
    batch = {b["level"]: b for b in result.batch_speedup()}
    assert batch[80]["speedup"] == pytest.approx(math.log2(81))
    assert batch[80]["throughput_gain"] == pytest.approx(10143.8 / 20, rel=1e-4)
    assert batch[1] == {"level": 1, "speedup": 1.0, "throughput_gain": 1.0}


def test_each_level_of_users_starts_over_the_ramp_up():
    """``--ramp-up``: every steady level spreads its users' start; the breaking shape keeps its own."""
    from surgelab.scenario.loader import build_scenario
    from surgelab.sweep.runner import level_scenario

    base = build_scenario({"target": {"url": "http://127.0.0.1:1/v1", "model": "m"}, "load": {"concurrency": 1}})
    config = SweepConfig(mode="concurrency", ramp_up=4, settle=5)
    assert level_scenario(base, config, 800, 20.0, 5.0, "level").load.ramp_up == 4.0
    assert level_scenario(base, SweepConfig(mode="concurrency"), 800, 20.0, 5.0, "level").load.ramp_up == 0.0
    shape = {"type": "step", "start": 10, "step": 10, "hold": "5s", "max": 20}
    assert level_scenario(base, config, shape, 20.0, 0.0, "break").load.ramp_up == 0.0
