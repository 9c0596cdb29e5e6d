"""Client calibration: the ceiling search, its cache, and the headroom every summary states."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from surgelab.runner.headroom import client_headroom, load_calibration, save_calibration
from surgelab.sweep import calibrate
from surgelab.sweep.calibrate import Level, find_ceiling, loaded_failures, measure


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


def test_the_search_climbs_then_bisects_to_the_last_sustained_rate(monkeypatch) -> None:
    true_ceiling = 730.0

    def fake(url, rate, seconds, workers, work, server_pid=None):
        ok = rate <= true_ceiling
        return Level(rate, rate if ok else rate * 0.8, 0.5, 2.0 if ok else 40.0, 0)

    monkeypatch.setattr(calibrate, "measure", fake)
    ceiling, levels = find_ceiling("http://unused", start=100)
    assert [lv.rate for lv in levels[:6]] == [100, 150, 225, 337.5, 506.25, 759.375]
    assert [lv.rate for lv in levels[6:8]] == [759.375, 759.375]  # a failing level is tried 3 times
    assert 632 <= ceiling <= true_ceiling  # three halvings of (506, 759]


def test_one_noisy_probe_does_not_end_the_climb(monkeypatch) -> None:
    """The cached 144 req/s: one probe at 150 failed on a busy moment and the search stopped there."""
    true_ceiling, seen = 5800.0, []

    def fake(url, rate, seconds, workers, work, server_pid=None):
        seen.append(rate)
        noisy = rate == 150 and seen.count(150) == 1  # its first try only
        ok = rate <= true_ceiling and not noisy
        return Level(rate, rate if ok else rate * 0.8, 0.5, 2.0 if ok else 40.0, 0, other_cores=0.05, cpus=8)

    monkeypatch.setattr(calibrate, "measure", fake)
    ceiling, levels = find_ceiling("http://unused", start=100)
    assert seen[:3] == [100, 150, 150]
    assert 0.9 * true_ceiling <= ceiling <= true_ceiling
    assert loaded_failures(levels) == []  # the failures above the ceiling ran on a quiet machine


def _level(rate, sustained, others, cpus=2):
    return Level(rate, rate if sustained else rate * 0.7, 1.0, 2.0 if sustained else 80.0, 0, other_cores=others, cpus=cpus)


def test_failures_on_a_loaded_machine_are_named_and_one_quiet_failure_is_evidence() -> None:
    loaded = [_level(100, True, 1.1), *[_level(150, False, 1.1) for _ in range(3)]]
    assert [lv.rate for lv in loaded_failures(loaded)] == [150, 150, 150]
    quiet_once = [_level(100, True, 1.1), _level(150, False, 1.1), _level(150, False, 0.05), _level(150, False, 1.2)]
    assert loaded_failures(quiet_once) == []
    # a big machine can spare what the client (one core) and the server (one core) do not need
    assert not _level(150, False, 5.0, cpus=8).loaded and _level(150, False, 6.5, cpus=8).loaded


def test_calibrate_caches_nothing_from_a_loaded_machine_and_says_why(cache, monkeypatch) -> None:
    from typer.testing import CliRunner

    from surgelab.cli import app

    def busy(url, rate, seconds, workers, work, server_pid=None):
        return _level(rate, rate < 150, 1.4)

    monkeypatch.setattr(calibrate, "measure", busy)
    result = CliRunner().invoke(app, ["calibrate", "--seconds", "0.5"], env={"COLUMNS": "300"})
    assert result.exit_code == 3, result.output
    assert "not cached" in result.output and "other processes used up to 1.40 of 2 cores" in result.output
    assert load_calibration(1) is None
    monkeypatch.setattr(calibrate, "measure", lambda url, rate, *a, **k: _level(rate, rate < 150, 0.05))
    result = CliRunner().invoke(app, ["calibrate", "--seconds", "0.5"], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert 100 <= load_calibration(1)["ceiling_rps"] < 150


def test_one_real_level_is_measured_against_the_zero_delay_server(zero_server, tmp_path) -> None:
    level = measure(zero_server.url, 50, 1.5, 1, tmp_path, zero_server.process.pid)
    assert 45 <= level.achieved <= 55  # (whether it is "sustained" depends on how busy the machine is)
    assert level.failed == 0 and 0 <= level.lag_p50_ms <= level.lag_p99_ms
    assert level.cpus == os.cpu_count() and level.workers == 1


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="the machine's CPU accounts are read from /proc/stat")
def test_a_level_measures_what_other_processes_used(zero_server, tmp_path) -> None:
    """Processes spinning on every core show as others' CPU, apart from the client's and the server's own."""
    cpus = os.cpu_count() or 1
    spin = "import time\nend = time.monotonic() + 6\nwhile time.monotonic() < end: pass\n"
    hogs = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(cpus)]
    try:
        level = measure(zero_server.url, 20, 1.5, 1, tmp_path, zero_server.process.pid)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert level.other_cores >= 0.6 * cpus and level.loaded


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
