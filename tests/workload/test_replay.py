"""Trace replay: recorded gaps kept exactly, speed factor, time windows and rate rescaling."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from surgelab.traces import Trace, read_trace, replay_indices, replay_offsets

AZURE_CONV = (
    Path(__file__).resolve().parents[2].parent / "shared" / "data" / "traces" / "AzureLLMInferenceTrace_conv.csv"
)


def make(offsets) -> Trace:
    n = len(offsets)
    return Trace(offsets_s=offsets, prompt_tokens=np.arange(n), output_tokens=np.arange(n))


@pytest.fixture(scope="module")
def azure() -> Trace:
    if not AZURE_CONV.is_file():
        pytest.skip(f"real trace {AZURE_CONV.name} not found in {AZURE_CONV.parent} (the shared data folder is absent)")
    return read_trace(AZURE_CONV)


def test_speed_one_keeps_every_gap(azure):
    ns = replay_offsets(azure)
    assert ns.dtype == np.int64 and len(ns) == len(azure) and ns[0] == 0
    error = np.abs(np.diff(ns) / 1e9 - np.diff(azure.offsets_s))
    assert error.max() <= 1e-9  # one nanosecond of rounding; the issue asks for 2 ms
    assert np.abs(ns / 1e9 - azure.offsets_s).max() <= 1e-9


def test_speed_two_halves_every_gap(azure):
    ns = replay_offsets(azure, speed=2.0)
    assert np.abs(np.diff(ns) / 1e9 - np.diff(azure.offsets_s) / 2).max() <= 1e-9
    assert ns[-1] / 1e9 == pytest.approx(azure.duration_s / 2, abs=1e-9)
    slow = replay_offsets(azure, speed=0.5)
    assert slow[-1] / 1e9 == pytest.approx(azure.duration_s * 2, abs=1e-9)


def test_window_selects_rows_and_rebases_to_its_start():
    trace = make([0.0, 1.0, 2.5, 2.5, 4.0, 7.0])
    rows = replay_indices(trace, start_s=1.0, end_s=4.0)
    assert rows.tolist() == [1, 2, 3]  # [start, end): 4.0 is out
    assert replay_offsets(trace, start_s=1.0, end_s=4.0).tolist() == [0, 1_500_000_000, 1_500_000_000]
    # The gap from the window start to its first request is kept, and scaled.
    assert replay_offsets(trace, start_s=0.5, end_s=3.0, speed=2).tolist() == [
        250_000_000,
        1_000_000_000,
        1_000_000_000,
    ]
    assert replay_indices(trace, start_s=5.0).tolist() == [5]
    assert replay_indices(trace, start_s=8.0).tolist() == []
    assert replay_offsets(trace, start_s=8.0).tolist() == []


def test_window_on_a_real_trace_pairs_offsets_with_rows(azure):
    rows = replay_indices(azure, start_s=600, end_s=1200)
    ns = replay_offsets(azure, start_s=600, end_s=1200)
    assert len(rows) == len(ns) > 0
    assert np.all(azure.offsets_s[rows] >= 600) and np.all(azure.offsets_s[rows] < 1200)
    assert np.abs(ns / 1e9 - (azure.offsets_s[rows] - 600)).max() <= 1e-9
    assert len(replay_indices(azure, 0, 600)) + len(rows) + len(replay_indices(azure, 1200)) == len(azure)


@pytest.mark.parametrize("rate", [1.0, 10.0, 55.3])
def test_rate_rescaling_hits_the_target_mean_rate(azure, rate):
    ns = replay_offsets(azure, rate=rate, speed=100.0)  # rate overrides speed
    replayed = make(ns / 1e9)
    assert replayed.mean_rate == pytest.approx(rate, rel=1e-9)
    # The shape is kept: every gap scaled by the same factor.
    factor = azure.mean_rate / rate
    assert np.abs(np.diff(ns) / 1e9 - np.diff(azure.offsets_s) * factor).max() <= 2e-9


def test_rate_rescaling_of_a_window():
    trace = make([0.0, 1.0, 2.0, 4.0, 10.0])
    ns = replay_offsets(trace, start_s=0.5, end_s=5.0, rate=3.0)  # rows at 1, 2, 4: mean gap 1.5 s
    assert np.diff(ns).mean() == pytest.approx(1e9 / 3.0)
    assert ns.tolist() == [111_111_111, 333_333_333, 777_777_778]  # scale 2/9, the lead-in gap too


def test_failed_rows_are_kept_and_can_be_dropped():
    trace = Trace(
        offsets_s=[0.0, 1.0, 2.0], prompt_tokens=[1, 2, 3], output_tokens=[1, 0, 1], failed=[False, True, False]
    )
    rows = replay_indices(trace)
    ns = replay_offsets(trace)
    keep = ~trace.failed[rows]
    assert rows[keep].tolist() == [0, 2] and ns[keep].tolist() == [0, 2_000_000_000]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"speed": 0},
        {"speed": -1},
        {"speed": float("inf")},
        {"start_s": -1},
        {"start_s": 2, "end_s": 2},
        {"rate": 0},
        {"rate": float("nan")},
    ],
)
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        replay_offsets(make([0.0, 1.0, 2.0]), **kwargs)


def test_rate_needs_two_distinct_times_and_replay_needs_timestamps():
    with pytest.raises(ValueError, match="at least two requests"):
        replay_offsets(make([0.0, 1.0, 2.0]), start_s=1.5, rate=2.0)
    with pytest.raises(ValueError, match="at least two requests"):
        replay_offsets(make([0.0, 0.0]), rate=2.0)
    lengths = Trace(offsets_s=[0.0, 0.0], prompt_tokens=[1, 2], output_tokens=[3, 4], has_timestamps=False)
    with pytest.raises(ValueError, match="no timestamps"):
        replay_offsets(lengths)
    assert replay_indices(lengths).tolist() == [0, 1]
