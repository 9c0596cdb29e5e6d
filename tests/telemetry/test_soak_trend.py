"""A steady run reports its drift (seed 000: steady runs "expose memory and connection leaks").

A real ``surgelab serve`` process that keeps 512 KiB per request leaks ~100 MiB in a few
seconds; its scraped resident memory must be called leak-like, with the slope's interval, and
the same server without the leak must not be. The trend statistics are held to SciPy's.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from surgelab.analysis.trend import trend
from surgelab.server.process import serve_process


def _soak(url: str, scenario_for, run, tmp_path, name: str) -> dict:
    scenario = scenario_for(
        url, load={"rate": 60, "duration": "3s", "arrival": "constant"}, workload={"prompt_tokens": 16, "output_tokens": 4},
        telemetry={"interval": "150ms", "sources": [{"url": url.removesuffix("/v1") + "/metrics", "name": "engine"}]},
    )  # fmt: skip
    return run(scenario, tmp_path / name).summary


@pytest.mark.parametrize("leak", [0, 512 * 1024])
def test_a_leaking_server_is_called_leak_like_and_a_steady_one_is_not(leak, scenario_for, run, tmp_path) -> None:
    with serve_process(["--leak-per-request", str(leak)], profile="tiny") as url:
        summary = _soak(url, scenario_for, run, tmp_path, f"leak-{leak}")
    memory = summary["trends"]["server_memory:engine"]
    assert memory["points"] >= 8
    warned = [w for w in summary["warnings"] if "engine server memory" in w]
    if leak:
        # 180 requests × 0.5 MiB kept: the fitted line climbs by most of 90 MiB.
        assert memory["leak_like"] and memory["end"] - memory["start"] > 50, memory
        assert memory["slope_ci_per_hour"][0] > 0 and memory["p_value"] < 0.01
        assert len(warned) == 1 and "a leak-like trend" in warned[0]
    else:
        assert not memory["leak_like"] and not warned, memory
    assert not summary["trends"]["error_rate"]["leak_like"]
    assert summary["trends"]["client_memory"] is None  # sampled once a second: 3 points say nothing yet


def test_the_clients_own_memory_samples_make_a_trend() -> None:
    from surgelab.analysis.trend import memory_trends

    steady = memory_trends({"rss_interval_s": 1.0, "rss_mb": [120.0 + (i % 3) * 0.1 for i in range(60)]}, {})
    growing = memory_trends({"rss_interval_s": 1.0, "rss_mb": [120.0 + i for i in range(60)]}, {})
    assert not steady["client_memory"]["leak_like"] and growing["client_memory"]["leak_like"]
    assert growing["client_memory"]["slope_per_hour"] == pytest.approx(3600)


def test_theil_sen_and_mann_kendall_agree_with_scipy() -> None:
    rng = np.random.default_rng(3)
    t = np.arange(60.0) * 10
    for drift in (0.0, 0.05):
        y = 200 + drift * t + rng.normal(0, 4, t.size)
        ours, ref = trend(t, y, "x", "ms"), scipy.stats.theilslopes(y, t, 0.95)
        assert ours.slope_per_hour / 3600 == pytest.approx(ref.slope)
        assert [v / 3600 for v in ours.slope_ci_per_hour] == pytest.approx([ref.low_slope, ref.high_slope])
        # Mann–Kendall's p is Kendall's tau test with a continuity correction: close to SciPy's.
        tau_p = scipy.stats.kendalltau(t, y, method="asymptotic").pvalue
        assert ours.p_value == pytest.approx(tau_p, rel=0.25, abs=1e-9)
        assert ours.leak_like is (drift > 0)
    spikes = 200 + rng.normal(0, 1, t.size)
    spikes[::7] += 500  # a few huge outliers, no drift: Theil–Sen is not moved
    assert not trend(t, spikes, "x", "ms").leak_like


def _run_with_ttft(duration_s: int, rate: float, ttft_ms) -> dict:
    """summary.json of hand-made records: ``rate`` req/s for ``duration_s``, TTFT ``ttft_ms(t)`` at each send."""
    from array import array

    from surgelab.analysis.summary import RunInfo, summarize
    from surgelab.metrics.record import Outcome, State
    from surgelab.metrics.store import RecordBuffer, RecordMeta
    from surgelab.scenario.loader import build_scenario

    buffer, n = RecordBuffer(), int(duration_s * rate)
    for k in range(n):
        intended = int(k / rate * 1e9)
        first = intended + int(ttft_ms(k / rate) * 1e6)
        out = Outcome(state=State.OK, sent_ns=intended, first_token_ns=first, end_ns=first + 1_000_000, output_tokens=2,
                      usage_source="server", token_ns=array("q", [first, first + 1_000_000]))  # fmt: skip
        buffer.add(RecordMeta(id=k, intended_ns=intended, warmup=False), out)
    scenario = build_scenario({"target": {"url": "http://127.0.0.1:1/v1", "model": "m"},
                               "load": {"rate": rate, "duration": f"{duration_s}s"}})  # fmt: skip
    return summarize(buffer.take(), scenario, RunInfo(stop_reason="completed", stopped_at_s=float(duration_s)))


def test_a_queue_filling_in_a_40s_run_is_no_leak_and_never_rises_from_below_zero() -> None:
    """Seen: "TTFT P50 rose from −25.8 ms …: a steady rise" on a 40 s run — the fitted line's start, extrapolated."""
    s = _run_with_ttft(40, 10, lambda t: 20.0 if t < 20 else 20.0 + 1.5 * (t - 20) ** 2)
    ttft = s["trends"]["ttft_p50"]
    assert ttft["start"] < 0, "the fitted line does start below zero here"
    assert ttft["first"] == pytest.approx(20.0) and ttft["change"] > 10 and ttft["span_s"] < 40
    assert not ttft["leak_like"] and not any("TTFT P50" in w for w in s["warnings"])


def test_a_slow_drift_over_a_soak_is_still_a_warning_from_its_real_baseline() -> None:
    s = _run_with_ttft(1200, 1, lambda t: 100.0 + t / 24)  # 100 ms → 150 ms over 20 minutes
    ttft = s["trends"]["ttft_p50"]
    assert ttft["leak_like"] and ttft["first"] == pytest.approx(102, abs=2)
    [warning] = [w for w in s["warnings"] if "TTFT P50" in w]
    assert warning.startswith("TTFT P50 rose from 102 to 147 ms (+44% over the run) in 1,140 s"), warning


def test_a_series_without_a_baseline_is_no_leak() -> None:
    t = np.arange(20.0) * 60
    errors = np.where(t < 600, 0.0, (t - 600) / 12_000)  # none for 10 minutes, then rising
    rising = trend(t, errors, "error rate", "fraction", 300)
    assert rising.p_value < 0.01 and rising.first == 0 and rising.change is None and not rising.leak_like
