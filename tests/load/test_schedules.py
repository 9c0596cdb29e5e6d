"""Open-loop schedules under every time-varying shape, checked statistically without sending.

Counts per window must lie in the Poisson band of the intended rate (the rate integrated
over the window), with a Bonferroni margin so a fixed-seed test can never be a coin toss;
the same counts must fall outside the band of a wrong rate, so the check has teeth.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy import integrate, stats

from surgelab.load.phases import open_loop_offsets
from surgelab.scenario.loader import build_scenario
from surgelab.scenario.model import Scenario
from surgelab.units import SECOND

TARGET = {"url": "http://127.0.0.1:9/v1", "model": "m"}
FAMILY_ALPHA = 1e-3  # chance that one test's band check fails by luck, over all its windows

SHAPES = {
    "step": {"type": "step", "start": 10, "step": 20, "hold": "4s", "max": 50},
    "ramp": {"type": "ramp", "start": 5, "end": 60, "over": "20s"},
    "spike": {"type": "spike", "base": 8, "peak": 60, "at": "5s", "rise": "2s", "hold": "4s", "decay": "3s", "after": "6s"},
    "wave": {"type": "wave", "mean": 30, "amplitude": 25, "period": "10s", "phase": "1s"},
    "stages": {"type": "stages", "start": 0, "stages": [{"duration": "5s", "target": 50}, {"duration": "5s", "target": 50},
                                                         {"duration": "8s", "target": 10}]},
}  # fmt: skip


def scenario(rate: Any, seed: int = 1, duration: str | None = "20s", **load: Any) -> Scenario:
    body = {"rate": rate, **({"duration": duration} if duration else {}), **load}
    return build_scenario({"target": TARGET, "seed": seed, "load": body})


def offsets_s(s: Scenario) -> np.ndarray:
    return open_loop_offsets(s, 0) / SECOND


def expected_counts(level, edges: np.ndarray) -> np.ndarray:
    """∫ level over each window, by adaptive quadrature (independent of the runner's grid)."""

    def f(t: float) -> float:
        return float(level(np.array([t]))[0])

    return np.array([integrate.quad(f, a, b, limit=200, points=None)[0] for a, b in zip(edges[:-1], edges[1:])])


def band(mu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-window Poisson limits at a Bonferroni-corrected level."""
    tail = FAMILY_ALPHA / (2 * len(mu))
    return stats.poisson.ppf(tail, mu), stats.poisson.ppf(1 - tail, mu)


def outside(counts: np.ndarray, mu: np.ndarray) -> np.ndarray:
    low, high = band(mu)
    return (counts < low) | (counts > high)


@pytest.mark.parametrize("name", SHAPES)
@pytest.mark.parametrize("seed", [1, 2])
def test_counts_per_window_follow_the_shape(name: str, seed: int):
    s = scenario(SHAPES[name], seed=seed)
    t = offsets_s(s)
    assert np.all(np.diff(t) >= 0) and t[0] >= 0 and t[-1] < 20
    edges = np.arange(0, 20.5, 0.5)
    counts = np.histogram(t, edges)[0]
    mu = expected_counts(s.load.shape.level, edges)
    bad = outside(counts, mu)
    assert not bad.any(), f"windows {edges[:-1][bad]}: counts {counts[bad]} vs expected {mu[bad].round(1)}"
    # Poisson, not just the right mean: the dispersion statistic is chi-square with one dof per window.
    dispersion = float(np.sum((counts - mu) ** 2 / mu))
    assert stats.chi2.ppf(1e-4, len(mu)) < dispersion < stats.chi2.ppf(1 - 1e-4, len(mu))
    # Against a flat rate with the same total, the same statistic rejects: the check can fail.
    flat = np.full_like(mu, mu.sum() / len(mu))
    assert float(np.sum((counts - flat) ** 2 / flat)) > stats.chi2.ppf(1 - 1e-4, len(mu))


def test_the_band_check_rejects_a_schedule_for_another_shape():
    t = offsets_s(scenario(SHAPES["ramp"]))
    edges = np.arange(0, 20.5, 0.5)
    reversed_ramp = scenario({"type": "ramp", "start": 60, "end": 5, "over": "20s"}).load.shape.level
    assert outside(np.histogram(t, edges)[0], expected_counts(reversed_ramp, edges)).sum() >= 10


def test_constant_arrivals_are_evenly_spaced_in_integrated_rate_time():
    """Λ(tᵢ) = i + ½ exactly for deterministic arrivals under a ramp (Λ in closed form)."""
    s = scenario({"type": "ramp", "start": 5, "end": 45, "over": "10s"}, duration="10s", arrival="constant")
    t = offsets_s(s)
    lam = 5 * t + 4 / 2 * t**2  # ∫₀ᵗ (5 + 4s) ds
    assert len(t) == int(5 * 10 + 2 * 100)  # Λ(10) = 250, points at 0.5 .. 249.5
    assert np.max(np.abs(lam - (np.arange(len(t)) + 0.5))) < 1e-4
    assert np.all(np.diff(t) > 0) and np.diff(t)[0] > np.diff(t)[-1]  # the gaps shrink as the rate climbs


def test_constant_arrivals_at_a_steady_rate():
    t = offsets_s(scenario(20, duration="3s", arrival="constant"))
    assert np.allclose(t, np.arange(60) / 20, atol=1e-9)


@pytest.mark.parametrize("cv", [0.5, 2.0])
def test_gamma_cv_on_a_steady_rate(cv: float):
    t = offsets_s(scenario(50, duration="300s", arrival="gamma", cv=cv))
    gaps = np.diff(t)
    assert abs(gaps.std() / gaps.mean() - cv) < 0.1 * cv  # ~15,000 gaps: 10 % is over 4 standard errors
    assert abs(len(t) / 300 - 50) < 5 * cv * np.sqrt(50 / 300)


@pytest.mark.parametrize("cv", [0.5, 2.0])
def test_gamma_cv_on_a_shaped_rate_after_rescaling(cv: float):
    """Under a ramp the raw gaps are not gamma, but in Λ-time they are, with the requested CV."""
    s = scenario({"type": "ramp", "start": 20, "end": 80, "over": "300s"}, duration="300s", arrival="gamma", cv=cv)
    t = offsets_s(s)
    lam = 20 * t + 0.2 / 2 * t**2  # ∫₀ᵗ (20 + 0.2 s) ds
    gaps = np.diff(lam)
    assert abs(gaps.mean() - 1) < 5 * cv / np.sqrt(gaps.size)
    assert abs(gaps.std() / gaps.mean() - cv) < 0.1 * cv
    raw = np.diff(t)
    assert raw[: len(raw) // 10].mean() > 2 * raw[-len(raw) // 10 :].mean()  # and the rate really climbed


def test_poisson_under_a_shape_has_exponential_gaps_in_lambda_time():
    s = scenario({"type": "ramp", "start": 10, "end": 50, "over": "100s"}, duration="100s")
    t = offsets_s(s)
    gaps = np.diff(10 * t + 0.2 * t**2)
    assert stats.kstest(gaps, "expon").pvalue > 1e-3
    assert stats.kstest(np.diff(t), "expon", args=(0, gaps.size / t[-1])).pvalue < 1e-6  # raw gaps are not


def test_a_level_of_zero_sends_nothing_there():
    s = scenario(
        {"type": "stages", "start": 0, "stages": [{"duration": "2s", "target": 0}, {"duration": "2s", "target": 40}]},
        duration=None,
    )
    t = offsets_s(s)
    assert t.min() > 2.0 and len(t) > 20


@pytest.mark.parametrize("rate", [25, SHAPES["spike"]])
@pytest.mark.parametrize("arrival", ["poisson", "gamma", "constant"])
def test_same_seed_same_schedule_other_seed_another(rate: Any, arrival: str):
    one, again = (
        offsets_s(scenario(rate, seed=7, arrival=arrival, cv=1.5)),
        offsets_s(scenario(rate, seed=7, arrival=arrival, cv=1.5)),
    )
    other = offsets_s(scenario(rate, seed=8, arrival=arrival, cv=1.5))
    assert np.array_equal(one, again)
    if arrival == "constant":
        assert np.array_equal(one, other)  # nothing random to differ
    else:
        assert len(one) != len(other) or not np.array_equal(one, other)


def test_phases_get_independent_streams():
    phase = {"load": {"rate": 20, "duration": "3s"}}
    s = build_scenario({"target": TARGET, "phases": [{"name": "a", **phase}, {"name": "b", **phase}]})
    a, b = open_loop_offsets(s, 0), open_loop_offsets(s, 1)
    assert not (len(a) == len(b) and np.array_equal(a, b))
