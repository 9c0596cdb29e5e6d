"""Client calibration: the ceiling search, its cache, and the headroom every summary states."""

from __future__ import annotations

import pytest

from surgelab.runner.headroom import client_headroom, load_calibration, save_calibration
from surgelab.sweep import calibrate
from surgelab.sweep.calibrate import Level, find_ceiling, measure


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


def test_the_search_climbs_then_bisects_to_the_last_sustained_rate(monkeypatch) -> None:
    true_ceiling = 730.0

    def fake(url, rate, seconds, workers, work):
        ok = rate <= true_ceiling
        return Level(rate, rate if ok else rate * 0.8, 0.5, 2.0 if ok else 40.0, 0)

    monkeypatch.setattr(calibrate, "measure", fake)
    ceiling, levels = find_ceiling("http://unused", start=100)
    assert [lv.rate for lv in levels[:6]] == [100, 150, 225, 337.5, 506.25, 759.375]
    assert 632 <= ceiling <= true_ceiling  # three halvings of (506, 759]


def test_one_real_level_is_measured_against_the_zero_delay_server(zero_server) -> None:
    level = measure(zero_server.url, 50, 1.5, 1, __import__("pathlib").Path(__import__("tempfile").mkdtemp()))
    assert 45 <= level.achieved <= 55  # (whether it is "sustained" depends on how busy the machine is)
    assert level.failed == 0 and 0 <= level.lag_p50_ms <= level.lag_p99_ms


def test_headroom_uses_the_cache_and_warns_near_the_ceiling(cache, scenario_for) -> None:
    scenario = scenario_for("http://127.0.0.1:1/v1", load={"rate": 300, "duration": "1s"})
    assert client_headroom(scenario)["note"].startswith("client not calibrated")
    save_calibration(1, 400.0, [])
    assert load_calibration(1)["ceiling_rps"] == 400.0
    block = client_headroom(scenario)
    assert block["share_of_ceiling"] == pytest.approx(0.75)
    assert "add --workers" in block["warning"]
    calm = client_headroom(scenario_for("http://127.0.0.1:1/v1", load={"rate": 100, "duration": "1s"}))
    assert calm["warning"] is None and calm["share_of_ceiling"] == pytest.approx(0.25)
    assert client_headroom(scenario, workers=2)["calibrated_ceiling_rps"] is None  # cached per worker count
