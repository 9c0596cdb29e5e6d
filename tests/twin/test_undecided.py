"""A twin's verdict knows how sure the measurement is: within, outside, or undecided."""

from __future__ import annotations

import math

import numpy as np
import pytest

from surgelab.analysis.stats import percentile_interval, rate_interval
from surgelab.twin.validate import compare_summaries


def test_percentile_interval_on_hand_ranks() -> None:
    values = np.arange(1.0, 101.0)[::-1]  # 1..100, unsorted: n·q = 50 ± 1.96·5 → ranks 40 and 60
    assert percentile_interval(values, 50) == (40.0, 60.0)
    low, high = percentile_interval(np.arange(1.0, 41.0), 99)  # 39.6 ± 1.23: ranks 38 and 41 > 40
    assert low == 38.0 and high == math.inf  # nothing bounds a P99 of 40 values from above
    assert percentile_interval(np.array([]), 50) == (-math.inf, math.inf)
    assert rate_interval(100) == pytest.approx((0.804, 1.196))


def test_percentile_interval_holds_the_true_percentile_about_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(7)
    truth = {50: math.log(2), 90: math.log(10)}  # exponential(1)
    for q, true in truth.items():
        hits = sum(lo <= true <= hi for lo, hi in (percentile_interval(rng.exponential(size=200), q) for _ in range(2000)))
        assert 0.92 <= hits / 2000 <= 0.98, (q, hits)


def _summary(rate: float, ttft: tuple[float, float], e2e: tuple[float, float], count: int | None = None) -> dict:
    def block(p50: float, p99: float) -> dict:
        return {"p50": p50, "p99": p99, **({"count": count} if count is not None else {})}

    return {"throughput": {"requests_per_s": rate}, "latency_ms": {"ttft": block(*ttft), "e2e": block(*e2e)}}


def test_a_miss_inside_the_measured_interval_is_undecided_outside_it_a_failure() -> None:
    measured = _summary(10.0, (100, 200), (1000, 2000))
    predicted = _summary(10.0, (125, 200), (1000, 2000))  # TTFT P50 +25 %, beyond the 15 % tolerance
    wide = {"ttft_p50": (80.0, 130.0)}  # a short run: the true P50 could be anywhere in 80–130 ms
    narrow = {"ttft_p50": (95.0, 105.0)}  # a long run: it is 95–105 ms, and 125 is a real miss
    undecided = compare_summaries(measured, predicted, intervals=wide)
    assert undecided.status["ttft_p50"] == "undecided" and undecided.verdict == "undecided" and not undecided.passed
    assert undecided.intervals["ttft_p50"] == [80.0, 130.0] and undecided.status["e2e_p50"] == "within"
    failed = compare_summaries(measured, predicted, intervals=narrow)
    assert failed.status["ttft_p50"] == "outside" and failed.verdict == "fail"
    assert compare_summaries(measured, measured, intervals=narrow).verdict == "pass"


def test_a_sparse_percentile_without_records_is_undecided_a_counted_one_is_judged() -> None:
    predicted = _summary(10.0, (100, 300), (1000, 2000))  # TTFT P99 +50 %
    few = compare_summaries(_summary(10.0, (100, 200), (1000, 2000), count=40), predicted)  # P99 of 40: no figure
    assert few.status["ttft_p99"] == "undecided" and few.verdict == "undecided"
    many = compare_summaries(_summary(10.0, (100, 200), (1000, 2000), count=5000), predicted)
    assert many.status["ttft_p99"] == "outside" and many.verdict == "fail"
