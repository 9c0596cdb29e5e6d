"""Durations and ratios as people write them in scenarios and flags."""

from __future__ import annotations

import math

import pytest

from surgelab.units import format_duration, parse_duration, parse_ratio


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30.0),
        ("250ms", 0.25),
        ("2m", 120.0),
        ("1h30m", 5400.0),
        ("1h 30m", 5400.0),
        ("1.5s", 1.5),
        (".5s", 0.5),
        ("100us", 1e-4),
        ("100µs", 1e-4),
        ("1d", 86400.0),
        ("2m30s", 150.0),
        ("10", 10.0),
        ("0.25", 0.25),
        (" 3s ", 3.0),
        (7, 7.0),
        (0.5, 0.5),
        ("0s", 0.0),
    ],
)
def test_parse_duration_accepts_units(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text", ["", "s", "5 parsecs", "5x", "ms5", "-1s", "-3", "1s-", "abc", True, float("nan"), float("inf"), "inf"]
)
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "fraction"),
    [("0.5%", 0.005), ("50%", 0.5), ("0.005", 0.005), (" 1% ", 0.01), (0.2, 0.2), (1, 1.0), ("0", 0.0)],
)
def test_parse_ratio(text, fraction):
    assert math.isclose(parse_ratio(text), fraction)


@pytest.mark.parametrize("text", ["half", "5%%", "%", "", True])
def test_parse_ratio_rejects(text):
    with pytest.raises(ValueError, match="ratio"):
        parse_ratio(text)


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.85, "850ms"), (12.5, "12.5s"), (12.0, "12s"), (200, "3m20s"), (3 * 3600 + 120, "3h02m")]
)
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text
