"""Every shape's level at hand-computed points, its natural duration and peak, and the
validation errors a user sees for impossible shapes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from surgelab.scenario.loader import ScenarioError, build_scenario
from surgelab.scenario.shapes import Breakpoint, Ramp, Replay, Spike, Stages, Steady, Step, Wave


def levels(shape, *t: float) -> list[float]:
    return np.asarray(shape.level(np.array(t, dtype=float))).tolist()


def test_steady():
    shape = Steady(level=5)
    assert levels(shape, 0, 17.5, 1e6) == [5, 5, 5]
    assert shape.natural_duration is None and shape.peak == 5


def test_step_stops_at_the_last_whole_step_below_max():
    shape = Step(type="step", start=2, step=3, hold="10s", max=12)  # 2, 5, 8, 11: 14 would pass 12
    assert levels(shape, 0, 9.999, 10, 25, 35, 39.9, 1000) == [2, 2, 5, 8, 11, 11, 11]
    assert shape.steps == 4 and shape.natural_duration == 40 and shape.peak == 11


def test_ramp_down_then_held():
    shape = Ramp(type="ramp", start=10, end=2, over="8s")
    assert levels(shape, 0, 2, 4, 8, 20) == [10, 8, 6, 2, 2]
    assert shape.natural_duration == 8 and shape.peak == 10


def test_spike_rises_holds_decays_and_returns_to_base():
    shape = Spike(type="spike", base=2, peak=10, at=5, rise=2, hold=3, decay=4, after=6)
    assert levels(shape, 0, 5, 6, 7, 9, 10, 12, 14, 19.9, 100) == [2, 2, 6, 10, 10, 10, 6, 2, 2, 2]
    assert shape.natural_duration == 20 and shape.peak == 10


def test_spike_without_rise_or_decay_is_a_rectangle():
    shape = Spike(type="spike", base=1, peak=4, at=2, hold=1)
    assert levels(shape, 1.999, 2, 2.999, 3, 10) == [1, 4, 4, 1, 1]
    assert shape.natural_duration == 3


def test_wave_and_its_phase():
    shape = Wave(type="wave", mean=10, amplitude=4, period="8s")
    assert np.allclose(levels(shape, 0, 2, 4, 6, 8), [10, 14, 10, 6, 10])
    shifted = Wave(type="wave", mean=10, amplitude=4, period=8, phase=2)
    assert np.allclose(levels(shifted, 0, 2), [14, 10])
    assert shape.natural_duration is None and shape.peak == 14


def test_stages_interpolate_like_k6():
    shape = Stages(
        type="stages",
        stages=[{"duration": "2s", "target": 10}, {"duration": 3, "target": 10}, {"duration": 1, "target": 0}],
    )
    assert np.allclose(levels(shape, 0, 1, 2, 4, 5.5, 6, 10), [0, 5, 10, 10, 5, 0, 0])
    assert shape.natural_duration == 6 and shape.peak == 10
    assert "0 → 10 (2s)" in shape.describe()


def test_a_zero_duration_stage_is_a_jump():
    shape = Stages(type="stages", start=1, stages=[{"duration": 0, "target": 5}, {"duration": 2, "target": 5}])
    assert levels(shape, 0, 1, 2) == [5, 5, 5]


def test_breakpoint_climbs_in_steps_to_its_cap():
    shape = Breakpoint(type="breakpoint", start=1, step=2, hold=2, max=7)
    assert levels(shape, 0, 1.9, 2, 4, 6, 100) == [1, 1, 3, 5, 7, 7]
    assert shape.natural_duration == 8 and shape.peak == 7
    assert Breakpoint(type="breakpoint", start=1, step=1, hold=1).natural_duration is None
    assert "error_rate > 5%" in Breakpoint(type="breakpoint", start=1, step=1, hold=1).describe()


def test_replay_level_counts_requests_per_second(tmp_path: Path):
    rows = [
        {"timestamp": ms, "input_length": 10, "output_length": 2, "hash_ids": [1]} for ms in (0, 100, 900, 1500, 2999)
    ]
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    shape = Replay(type="replay", trace=str(trace), format="mooncake")
    assert levels(shape, -1, 0, 0.5, 1, 2, 3) == [0, 3, 3, 1, 1, 0]
    assert shape.natural_duration == pytest.approx(2.999 + 1e-3) and shape.peak == 3
    assert levels(Replay(type="replay", trace=str(trace), format="mooncake", speed=2), 0, 1) == [4, 1]


TARGET = {"url": "http://127.0.0.1:9/v1", "model": "m"}


@pytest.mark.parametrize(
    ("load", "message"),
    [
        ({"rate": {"type": "step", "start": 5, "step": 1, "hold": 1, "max": 2}}, "load.rate: max must be >= start"),
        ({"rate": {"type": "breakpoint", "start": 1, "step": 0, "hold": 1}}, "load.rate.step: Input should be greater than 0"),
        ({"rate": {"type": "wave", "mean": 1, "amplitude": 2, "period": 3}}, "load.rate: amplitude must not exceed mean"),
        ({"rate": {"type": "ramp", "start": 1, "end": 2, "over": 0}}, "load.rate.over:"),
        ({"rate": {"type": "spike", "base": 1, "peak": 3}}, "load.rate.at: required field is missing"),
        ({"rate": {"type": "stages", "stages": []}}, "load.rate.stages: List should have at least 1 item"),
        ({"rate": {"type": "stages", "stages": [{"duration": -1, "target": 2}]}}, "load.rate.stages[0].duration:"),
        ({"rate": {"type": "zigzag"}}, "load.rate: Input tag 'zigzag' found using 'type' does not match"),
        ({"rate": "fast"}, "expected a number or a shape mapping with type: one of steady, step"),
        ({"concurrency": {"type": "ramp", "start": 1, "end": 3, "over": 2}, "warmup": "5s"}, "warmup (5s) must be shorter than duration (2s)"),
    ],
)  # fmt: skip
def test_impossible_shapes_are_named_with_their_field(load, message):
    with pytest.raises(ScenarioError) as err:
        build_scenario({"target": TARGET, "load": load}, source="s.yaml")
    assert len(err.value.messages) == 1
    assert err.value.messages[0].startswith("s.yaml:1: ") and message in err.value.messages[0]


def test_replay_under_concurrency_is_refused(tmp_path: Path):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": []}\n')
    with pytest.raises(ScenarioError, match="a replay sets arrival times: use it as rate"):
        build_scenario({"target": TARGET, "load": {"concurrency": {"type": "replay", "trace": str(trace)}}})


def test_replay_of_a_missing_file_names_it(tmp_path: Path):
    with pytest.raises(ScenarioError, match="trace file not found: .*nothing.csv"):
        build_scenario({"target": TARGET, "load": {"rate": {"type": "replay", "trace": str(tmp_path / "nothing.csv")}}})


def test_the_planned_duration_follows_the_shape():
    def planned(load):
        return build_scenario({"target": TARGET, "load": load}).load.planned_duration

    assert planned({"rate": {"type": "step", "start": 1, "step": 1, "hold": "2s", "max": 3}}) == 6
    assert planned({"rate": {"type": "wave", "mean": 2, "amplitude": 1, "period": 4}}) == 60
    assert planned({"rate": {"type": "ramp", "start": 1, "end": 3, "over": 5}, "duration": "2s"}) == 2
