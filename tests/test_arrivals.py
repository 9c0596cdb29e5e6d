"""Open-loop arrival schedules: the right process, the right rate, reproducible from the seed."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from surgelab.load.arrivals import arrival_offsets
from surgelab.load.phases import open_loop_offsets
from surgelab.scenario.load import Arrival
from surgelab.scenario.loader import build_scenario


def _scenario(**load):
    return build_scenario({"seed": load.pop("seed", 0), "target": {"url": "http://127.0.0.1:1/v1", "model": "m"},
                           "load": {"duration": "100s", **load}})  # fmt: skip


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_poisson_gaps_are_exponential(seed):
    rate, duration = 50.0, 200.0
    offsets = arrival_offsets(rate, duration, Arrival.POISSON, np.random.default_rng(seed))
    gaps = np.diff(offsets)
    result = stats.kstest(gaps, "expon", args=(0, 1 / rate))
    assert result.pvalue > 0.001, result
    assert len(offsets) == pytest.approx(rate * duration, rel=5 * np.sqrt(rate * duration) / (rate * duration))


def test_ks_test_can_tell_constant_from_poisson():
    """The KS check above is a real check: the same test rejects gamma gaps with cv=2."""
    rate = 50.0
    gaps = np.diff(arrival_offsets(rate, 200.0, Arrival.GAMMA, np.random.default_rng(0), cv=2.0))
    assert stats.kstest(gaps, "expon", args=(0, 1 / rate)).pvalue < 1e-6


def test_constant_arrivals_are_evenly_spaced():
    offsets = arrival_offsets(8.0, 5.0, Arrival.CONSTANT, np.random.default_rng(0))
    assert len(offsets) == 40
    assert offsets[0] == 0.0
    assert np.allclose(np.diff(offsets), 1 / 8.0)
    assert offsets[-1] < 5.0


@pytest.mark.parametrize(("rate", "duration", "count"), [(3.0, 1.0, 3), (2.5, 2.0, 5), (10.0, 0.35, 4), (0.5, 3.0, 2)])
def test_constant_count_is_rate_times_duration_rounded_up(rate, duration, count):
    assert len(arrival_offsets(rate, duration, Arrival.CONSTANT, np.random.default_rng(0))) == count


@pytest.mark.parametrize("cv", [0.5, 2.0])
def test_gamma_has_the_requested_cv_and_rate(cv):
    rate = 40.0
    offsets = arrival_offsets(rate, 500.0, Arrival.GAMMA, np.random.default_rng(11), cv=cv)
    gaps = np.diff(offsets)
    measured_cv = gaps.std() / gaps.mean()
    assert abs(measured_cv - cv) <= 0.1 * cv
    assert gaps.mean() == pytest.approx(1 / rate, rel=0.05)


@pytest.mark.parametrize("arrival", list(Arrival))
def test_offsets_start_at_zero_ascend_and_stay_inside_the_duration(arrival):
    offsets = arrival_offsets(20.0, 10.0, arrival, np.random.default_rng(5), cv=1.5)
    assert offsets[0] == 0.0
    assert np.all(np.diff(offsets) >= 0)
    assert offsets[-1] < 10.0


def test_long_schedules_need_more_than_one_block():
    offsets = arrival_offsets(1000.0, 30.0, Arrival.GAMMA, np.random.default_rng(1), cv=3.0)
    assert offsets[-1] > 29.0
    assert len(offsets) == pytest.approx(30_000, rel=0.1)


@pytest.mark.parametrize(("rate", "duration"), [(0.0, 10.0), (10.0, 0.0), (-1.0, 10.0)])
def test_empty_schedule(rate, duration):
    assert len(arrival_offsets(rate, duration, Arrival.POISSON, np.random.default_rng(0))) == 0


@pytest.mark.parametrize("arrival", ["poisson", "gamma", "uniform"])
def test_schedule_is_reproducible_from_the_seed(arrival):
    a = open_loop_offsets(_scenario(rate=30, arrival=arrival, cv=2, seed=42))
    b = open_loop_offsets(_scenario(rate=30, arrival=arrival, cv=2, seed=42))
    c = open_loop_offsets(_scenario(rate=30, arrival=arrival, cv=2, seed=43))
    assert a.dtype == np.int64
    assert np.array_equal(a, b)
    assert not np.array_equal(a[: min(len(a), len(c))], c[: min(len(a), len(c))])


def test_schedule_in_nanoseconds_matches_the_rate():
    offsets = open_loop_offsets(_scenario(rate=4, arrival="constant", duration="2s"))
    assert offsets.tolist() == [0, 250_000_000, 500_000_000, 750_000_000, 1_000_000_000, 1_250_000_000,
                                1_500_000_000, 1_750_000_000]  # fmt: skip


def test_the_runner_schedule_for_a_poisson_scenario_passes_ks():
    offsets = open_loop_offsets(_scenario(rate=40, arrival="poisson", duration="100s", seed=5)) / 1e9
    assert len(offsets) == pytest.approx(4000, rel=0.1)
    assert stats.kstest(np.diff(offsets), "expon", args=(0, 1 / 40)).pvalue > 0.001


def test_uniform_sends_the_constant_count_at_uniform_times():
    """inference-perf's "constant": rate × duration requests, at independent uniform times (not evenly spaced)."""
    rate, duration = 20.0, 600.0
    offsets = arrival_offsets(rate, duration, Arrival.UNIFORM, np.random.default_rng(3), start_at_zero=False)
    assert len(offsets) == 12_000 == len(arrival_offsets(rate, duration, Arrival.CONSTANT, np.random.default_rng(3)))
    assert stats.kstest(offsets, "uniform", args=(0, duration)).pvalue > 0.001
    gaps = np.diff(offsets)  # given the count, the gaps of a Poisson process: exponential, not 1/rate each
    assert stats.kstest(gaps, "expon", args=(0, 1 / rate)).pvalue > 0.001
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.05)


def test_uniform_reproduces_inference_perfs_constant_timer():
    """Its timer's schedule (exponential gaps scaled so that they sum to the stage) and ours are one distribution."""
    rng = np.random.default_rng(8)
    rate, duration = 5.0, 600.0
    gaps = rng.exponential(1 / rate, int(rate * duration))
    theirs = np.cumsum(gaps * duration / gaps.sum())
    ours = arrival_offsets(rate, duration, Arrival.UNIFORM, np.random.default_rng(9), start_at_zero=False)
    assert stats.ks_2samp(theirs, ours).pvalue > 0.001
    assert stats.ks_2samp(np.diff(theirs), np.diff(ours)).pvalue > 0.001
    evenly = arrival_offsets(rate, duration, Arrival.CONSTANT, rng)
    assert stats.ks_2samp(np.diff(theirs), np.diff(evenly)).pvalue < 1e-6
