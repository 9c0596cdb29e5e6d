"""Token-length and think-time distributions: scenario data that samples what it says."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import TypeAdapter, ValidationError

from surgelab.scenario.distributions import Distribution, Exponential, Fixed, LogNormal, Normal, Uniform

PARSE = TypeAdapter(Distribution).validate_python
N = 200_000


@pytest.mark.parametrize(
    ("data", "kind", "mean"),
    [
        (256, Fixed, 256.0),
        (0.5, Fixed, 0.5),
        ("2s", Fixed, 2.0),
        ("250ms", Fixed, 0.25),
        ({"dist": "fixed", "value": 3}, Fixed, 3.0),
        ({"dist": "uniform", "min": 10, "max": 30}, Uniform, 20.0),
        ({"dist": "normal", "mean": 100, "std": 10}, Normal, 100.0),
        ({"dist": "lognormal", "mean": 300, "std": 150}, LogNormal, 300.0),
        ({"dist": "exponential", "mean": "1s"}, Exponential, 1.0),
    ],
)
def test_sample_means(data, kind, mean):
    dist = PARSE(data)
    assert isinstance(dist, kind)
    assert dist.mean == pytest.approx(mean)
    samples = dist.sample(np.random.default_rng(0), N)
    assert samples.shape == (N,)
    assert samples.min() >= 0
    # five standard errors of the mean, from the sample itself (zero for a fixed value)
    assert abs(samples.mean() - mean) <= 5 * samples.std() / np.sqrt(N) + 1e-12


def test_lognormal_has_the_requested_std():
    samples = PARSE({"dist": "lognormal", "mean": 300, "std": 150}).sample(np.random.default_rng(1), N)
    assert samples.std() == pytest.approx(150, rel=0.03)


def test_uniform_stays_in_range():
    samples = PARSE({"dist": "uniform", "min": 10, "max": 30}).sample(np.random.default_rng(2), N)
    assert samples.min() >= 10 and samples.max() <= 30


def test_normal_is_clipped_at_zero_and_max():
    samples = PARSE({"dist": "normal", "mean": 1, "std": 5, "max": 4}).sample(np.random.default_rng(3), 10_000)
    assert samples.min() == 0.0 and samples.max() == 4.0


def test_lognormal_max_caps():
    samples = PARSE({"dist": "lognormal", "mean": 100, "std": 300, "max": 250}).sample(np.random.default_rng(4), 10_000)
    assert samples.max() == 250.0


def test_exponential_zero_mean_is_no_wait():
    assert not PARSE({"dist": "exponential", "mean": 0}).sample(np.random.default_rng(5), 10).any()


def test_same_seed_same_samples():
    dist = PARSE({"dist": "exponential", "mean": 2})
    a = dist.sample(np.random.default_rng(7), 100)
    assert np.array_equal(a, dist.sample(np.random.default_rng(7), 100))
    assert not np.array_equal(a, dist.sample(np.random.default_rng(8), 100))


@pytest.mark.parametrize(
    "data",
    [
        -1,
        "fast",
        True,
        {"dist": "uniform", "min": 5, "max": 1},
        {"dist": "uniform", "min": 5},
        {"dist": "poisson", "mean": 3},
        {"dist": "normal", "mean": 3, "std": -1},
        {"dist": "lognormal", "mean": 0, "std": 1},
        {"dist": "fixed", "value": 1, "extra": 2},
    ],
)
def test_invalid(data):
    with pytest.raises(ValidationError):
        PARSE(data)
