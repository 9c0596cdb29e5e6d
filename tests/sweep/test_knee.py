"""Kneedle on synthetic curves whose knee is known, under seeded noise, and the latency cross-check."""

from __future__ import annotations

import math

import numpy as np
import pytest

from surgelab.analysis.knee import find_knee, kneedle


def test_piecewise_linear_knee_is_the_corner():
    x = np.arange(1, 17, dtype=float)
    y = np.minimum(x, 6.0) * 4
    knee = kneedle(x, y)
    assert knee is not None and knee.x == 6.0 and knee.index == 5


def test_saturating_curve_knee_where_normalised_slope_is_one():
    # y = 1 - exp(-x/τ) on [0, 10]: the difference curve y_n - x_n peaks where dy_n/dx_n = 1,
    # i.e. (10/τ)·exp(-x/τ) = 1 - exp(-10/τ), which for τ = 2 is x = 2·ln(5/(1-e^-5)) ≈ 3.23.
    x = np.linspace(0, 10, 101)
    y = 1 - np.exp(-x / 2)
    knee = kneedle(x, y)
    expected = 2 * math.log(5 / (1 - math.exp(-5)))
    assert knee is not None and knee.x == pytest.approx(expected, abs=0.1)


def test_geometric_levels_find_the_batch_limit():
    levels = [1, 2, 4, 8, 16, 32, 64]
    rps = [min(u, 8) * 6.25 for u in levels]  # 8 slots, 160 ms per request
    ttft = [10, 10, 11, 12, 180, 500, 1100]
    result = find_knee(levels, rps, ttft, unit="users", latency_name="p99 TTFT")
    assert result.level == 8
    assert result.latency is not None and result.agree is True
    assert "throughput bends at 8 users" in result.reason and "the two agree" in result.reason


def test_seed_stress_model_knee_at_memory_capacity():
    # The seeds' InferenceService: 16 GB ÷ 0.2 GB per request = 80 concurrent; beyond it
    # latency grows quadratically and errors start at 1.2 × capacity.
    def latency(c):
        return max(0.05 / math.log2(c + 1), 0.005) if c <= 80 else 0.05 * (1 + 3 * (c / 80 - 1) ** 2)

    def errors(c):
        return 0.0 if c <= 96 else min((c - 96) / 80, 0.5)

    levels = list(range(10, 201, 10))
    qps = [c / latency(c) * (1 - errors(c)) for c in levels]
    assert find_knee(levels, qps).level == 80


@pytest.mark.parametrize("seed", range(20))
def test_stable_under_noise(seed):
    rng = np.random.default_rng(seed)
    levels = np.array([1, 2, 3, 4, 6, 8, 10, 12, 16, 20, 24, 32], dtype=float)
    clean = 50 * levels / (1 + (levels / 10) ** 4) ** 0.25  # smooth saturation near 10
    noisy = clean * (1 + rng.normal(0, 0.03, size=clean.size))
    clean_knee = find_knee(levels, clean).index
    noisy_knee = find_knee(levels, noisy).index
    assert clean_knee is not None and noisy_knee is not None
    assert abs(noisy_knee - clean_knee) <= 1, (levels[clean_knee], levels[noisy_knee])


def test_straight_line_and_too_few_points_have_no_knee():
    x = np.arange(1, 10, dtype=float)
    rng = np.random.default_rng(7)
    assert kneedle(x, 3 * x * (1 + rng.normal(0, 0.005, x.size))) is None
    result = find_knee([1, 2], [5, 10])
    assert result.index is None and "only 2 level" in result.reason


def test_latency_stands_in_when_throughput_has_not_bent():
    levels = [1, 2, 4, 8]
    rps = [5, 10, 20, 40]
    ttft = [10, 11, 12, 400]
    result = find_knee(levels, rps, ttft)
    assert result.throughput is None and result.level == 4
    assert "latency inflection stands in" in result.reason


def test_unsorted_levels_report_indices_into_the_input():
    levels = [8, 1, 32, 4, 16, 2]
    rps = [min(v, 8) for v in levels]
    result = find_knee(levels, rps)
    assert result.index == 0 and result.level == 8
