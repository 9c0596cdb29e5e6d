"""The live dashboard: a real browser connects late, sees the run since its start, the numbers
advance, a reload picks the history up again; and serving it does not disturb the schedule."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from surgelab.aio import run_async
from surgelab.dashboard import Dashboard, DashboardSettings
from surgelab.runner import run_scenario
from surgelab.scenario import load_scenario


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_live_dashboard_in_a_real_browser(tiny_server, browser, screenshot_dir, tmp_path, scenario_maker, narrow, dashboard_url):
    scenario = scenario_maker(tmp_path / "live.yaml", tiny_server.base_url, rate=20, duration="9s", warmup="0.5s")
    out = tmp_path / "live"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # a lag bound of 1 µs no client meets: the run ends INVALID for lag, which the lag card must show
    # in red while it runs and the page must keep on screen after the run (the dashboard's own effect
    # on the schedule is measured in the next test)
    command = [sys.executable, "-m", "surgelab", "run", str(scenario), "--out", str(out), "-q",
               "--dashboard", "--dashboard-token", "t0ken", "--set", "validity.max_lag_p99=1us",
               "--scrape", tiny_server.root_url + "/metrics"]  # fmt: skip
    context = browser()  # started before the run: only the page itself comes late
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = dashboard_url(process)
        assert url.startswith("http://127.0.0.1:") and url.endswith("/?token=t0ken")
        base = url.split("?")[0]
        assert _get(base) == 403 and _get(base + "api/state") == 403
        assert _get(base + "api/state?token=t0ken") == 200
        assert _get(base + "favicon.ico") == 200  # was 404
        time.sleep(1.0)  # the browser comes late
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url)
        page.wait_for_function("window.SURGELAB_DASH.polls >= 1 && window.SURGELAB_DASH.last !== null", timeout=10_000)
        first = page.evaluate("({n: SURGELAB_DASH.entries.length, t0: SURGELAB_DASH.entries[0].elapsed_s, "
                              "t: SURGELAB_DASH.last.elapsed_s, ok: SURGELAB_DASH.last.ok})")  # fmt: skip
        assert first["t0"] < 1.0, "the history since the start is served to a late browser"
        assert first["n"] >= 2
        page.wait_for_function(
            f"SURGELAB_DASH.last.ok >= {first['ok']} + 10 && SURGELAB_DASH.last.elapsed_s >= {first['t']} + 1.0",
            timeout=10_000,
        )
        later = page.evaluate("SURGELAB_DASH.last")
        assert later["scheduled"] >= later["ok"] >= first["ok"] + 10
        assert later["send_rate"] > 0 and later["completion_rate"] > 0
        # the pipeline shows the same numbers
        assert page.inner_text("#count-ok .value") == str(later["ok"]) or int(page.inner_text("#count-ok .value")) >= later["ok"]
        assert page.text_content("#node-responses-1").endswith("/s")
        # the target's own gauges, scraped by the dashboard's thread
        assert set(later["gauges"]) == {"running", "waiting", "kv_usage"}
        assert page.text_content("#node-target-1").endswith(" running")
        assert page.text_content("#node-target-3").startswith("KV cache ")
        assert page.text_content("#edge-0").endswith("/s") and page.text_content("#edge-3").endswith("/s")
        charts = page.evaluate("window.SURGELAB_CHARTS")
        assert "target running" in charts["live-inflight"]["traces"]
        for chart_id in ("live-throughput", "live-latency", "live-inflight", "live-errors"):
            assert charts[chart_id]["points"] and all(p >= 3 for p in charts[chart_id]["points"]), (chart_id, charts[chart_id])
        assert charts["live-throughput"]["traces"][0] == "target req/s"
        # like for like: the target is the same 5 s trailing mean as the achieved rates (a constant 20 req/s
        # here); latency is of the last seconds, with its count
        assert later["target_rate"] == pytest.approx(20.0) and later["recent_n"] > 0
        assert charts["live-latency"]["title"] == "Latency of the last 5 s (ms)"
        # issue 30: the axis spans the plan from the start (it grew with the run); tokens/s and TPOT drawn
        for chart_id in ("live-throughput", "live-latency", "live-inflight", "live-errors", "live-decode"):
            assert page.evaluate(f"document.getElementById('{chart_id}')._fullLayout.xaxis.range") == [0, later["duration_s"]], chart_id
        assert later["duration_s"] == 9 and later["elapsed_s"] < 9.0  # the planned 9 s, seen before its end
        assert charts["live-decode"]["traces"] == ["output tokens/s", "TPOT p50 (ms)", "TPOT p99 (ms)"]
        decode = page.evaluate("SURGELAB_DASH.entries.filter(x => x.recent_tokens_per_s > 0).map(x => [x.recent_tokens_per_s, x.recent_tpot_p50_ms])")
        assert decode and all(tps > 0 and tpot > 0 for tps, tpot in decode)
        # the lag card is red once the bound is crossed; a progress bar with the time remaining
        assert "bad" in page.get_attribute("#count-lag", "class").split()
        assert page.inner_text("#count-lag .n").startswith("bound 0.00") and "crossed" in page.inner_text("#count-lag .n")
        assert "s remaining" in page.inner_text("#progress-text")
        page.screenshot(path=str(screenshot_dir / "dashboard.png"))
        seen = page.evaluate("SURGELAB_DASH.entries.length")
        page.reload()  # a reconnecting browser gets the whole history again
        page.wait_for_function("window.SURGELAB_DASH.polls >= 1 && window.SURGELAB_DASH.last !== null", timeout=10_000)
        assert page.evaluate("SURGELAB_DASH.entries.length") >= seen
        assert page.evaluate("SURGELAB_DASH.entries[0].elapsed_s") < 1.0
        assert errors == []
        assert process.wait(timeout=30) == 3, process.stderr.read()  # type: ignore[union-attr]  # INVALID
        # after the run: the verdict stays on the page (the server waited for the page to fetch it)
        page.wait_for_function("window.SURGELAB_DASH.verdict !== null", timeout=5_000)
        summary = json.loads((out / "summary.json").read_text())
        verdict = page.inner_text("#verdict .banner")  # the same banner as the report: word, exit status, stop reason
        assert " ".join(verdict.split()).startswith("INVALID surgelab run exit 3 · stop: completed")
        assert summary["validity"]["reasons"][0] in verdict and not summary["validity"]["valid"]
        assert "invalid" in page.get_attribute("#verdict .banner", "class").split()
        assert page.inner_text("#progress-text").startswith("finished after")
        report = (out / "report.html").resolve()  # where to look next: the run's report, named after the run
        assert page.get_attribute("#report-link a", "href") == report.as_uri() and str(report) in page.inner_text("#report-link")
        time.sleep(1.5)  # the server is gone now: the page does not turn to "disconnected, retrying…"
        assert "disconnected" not in page.inner_text("#status") and page.is_visible("#verdict")
        page.screenshot(path=str(screenshot_dir / "dashboard-final.png"))
        narrow(page)  # the pipeline, cards and curves fit a phone after the run
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    assert (out / "report.html").exists() and (out / "summary.json").exists()
    # the server went away with the run
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=2)


def _lag(tmp_path, server, scenario_maker, name: str, dashboard: bool, duration: str = "3s") -> tuple[dict, int]:
    path = scenario_maker(tmp_path / f"{name}.yaml", server.base_url, rate=150, duration=duration, warmup="0.5s",
                          output_tokens=4, mix=False)  # fmt: skip
    scenario = load_scenario(path)
    board = Dashboard(DashboardSettings()) if dashboard else None
    stop = threading.Event()
    polls = [0]

    def hammer(url: str) -> None:  # a greedy browser: the whole history, twenty times a second
        while not stop.is_set():
            try:
                with urllib.request.urlopen(url + "api/state?since=0", timeout=2) as response:
                    json.loads(response.read())
                polls[0] += 1
            except OSError:
                pass
            time.sleep(0.05)

    threads = []
    if board is not None:
        url = board.start()
        threads = [threading.Thread(target=hammer, args=(url,), daemon=True) for _ in range(2)]
        for t in threads:
            t.start()
    results: list = []

    def run() -> None:  # on its own thread: the session's browser driver owns this thread's event loop
        results.append(run_async(run_scenario(scenario, tmp_path / name, observers=[board] if board else [])))

    try:
        runner = threading.Thread(target=run)
        runner.start()
        runner.join(60)
        result = results[0]
    finally:
        stop.set()
        for t in threads:
            t.join(5)
        if board is not None:
            board.stop()
    return result.summary, polls[0]


def test_the_dashboard_does_not_disturb_the_schedule(tiny_server, tmp_path, scenario_maker, record_property):
    """Schedule lag at 150 req/s without and with a dashboard polled by two greedy clients.

    Reported (``record_property`` and stdout), not timed: the assertion is only that both runs
    stay valid; the figures are for the README's performance table.
    """
    _lag(tmp_path, tiny_server, scenario_maker, "warm-up", dashboard=False, duration="1s")  # first run in the process
    plain, _ = _lag(tmp_path, tiny_server, scenario_maker, "plain", dashboard=False)
    board, polls = _lag(tmp_path, tiny_server, scenario_maker, "board", dashboard=True)
    assert polls >= 20, "the dashboard answered while the run was under way"
    for summary in (plain, board):
        assert summary["validity"]["valid"], summary["validity"]
    figures = {k: (plain["schedule_lag_ms"][k], board["schedule_lag_ms"][k]) for k in ("p50", "p99", "max")}
    record_property("schedule_lag_ms_without_with_dashboard", figures)
    print(f"schedule lag ms (without, with dashboard; {polls} full-history polls): {figures}")


def _snapshot(i: int):
    from surgelab.metrics.live import LiveSnapshot

    return LiveSnapshot(i * 0.5, 10.0, "10 req/s", 10.0, 9.0, 2, i * 5, i * 4, 1, 0, 0, 0.1, 1.0, 2.0, 3.0, 4.0, 0.5)


def test_state_since_token_and_bounded_history(monkeypatch):
    import surgelab.dashboard.server as server

    monkeypatch.setattr(server, "MAX_HISTORY", 100)
    board = Dashboard(DashboardSettings(token="k"))
    for i in range(1, 11):
        board.update(_snapshot(i))
    url = board.start()
    try:
        base = url.split("?")[0]
        assert _get(base + "api/state?since=0") == 403 and _get(base + "plotly.min.js") == 200
        with urllib.request.urlopen(base + "api/state?since=7&token=k", timeout=5) as response:
            state = json.loads(response.read())
        assert [e["seq"] for e in state["history"]] == [8, 9, 10] and state["seq"] == 10
        assert state["history"][-1]["arrival_rate"] == 10.0 and state["history"][-1]["queue"] == 50 - 2 - 41
        for i in range(11, 1001):
            board.update(_snapshot(i))
        assert len(board.history) <= 100 and board.history[-1]["seq"] == 1000
        assert board.history[0]["seq"] == 1, "thinning keeps the start of the run"
        with urllib.request.urlopen(base + "api/state?since=999&token=k", timeout=5) as response:
            assert [e["seq"] for e in json.loads(response.read())["history"]] == [1000]
    finally:
        board.stop()
    assert board.finished


def test_gauges_from_an_exposition():
    from surgelab.dashboard.gauges import gauges_from_text

    text = (
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{engine="0"} 3.0\nvllm:num_requests_running{engine="1"} 2.0\n'
        "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 7.0\n"
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        'vllm:kv_cache_usage_perc{engine="0"} 0.25\nvllm:kv_cache_usage_perc{engine="1"} 0.5\n'
        "# TYPE other_metric counter\nother_metric_total 99\n"
    )
    assert gauges_from_text(text) == {"running": 5.0, "waiting": 7.0, "kv_usage": 0.5}
    assert gauges_from_text("# nothing here\n") == {}


def test_target_and_achieved_rates_share_one_window_and_latency_is_recent():
    """A step from 10 to 30 req/s at 10 s: the page once drew the instantaneous target (30) against a 5 s
    trailing achieved rate (18), so the client looked a third short; and latency never forgot a spike."""
    from surgelab.metrics.live import LiveSnapshot
    from surgelab.metrics.record import Outcome, State
    from surgelab.metrics.store import RecordMeta

    board = Dashboard(DashboardSettings())
    seconds = [i * 0.5 for i in range(1, 27)]  # snapshots twice a second up to 13 s

    def arrivals(t: float) -> int:  # exactly on schedule: 10/s, then 30/s from 10 s
        return int(10 * min(t, 10) + 30 * max(t - 10, 0))

    for n, t in enumerate(seconds):
        e2e = 2.0 if t < 7 else 0.02  # a latency spike (2 s) that ended before the last 5 s
        out = Outcome()
        out.state, out.first_token_ns, out.end_ns = State.OK, int((t - e2e / 2) * 1e9), int(t * 1e9)
        board.observe(RecordMeta(id=n, intended_ns=int((t - e2e) * 1e9), warmup=False), out)
        target = "30 req/s" if t >= 10 else "10 req/s"
        board.update(LiveSnapshot(t, 20.0, target, 0.0, 0.0, 0, arrivals(t), 0, 0, 0, 0, 0.0,
                                  None, None, None, None, None))  # fmt: skip
    last = board.history[-1]  # at 13 s the window is [8, 13): 2 s at 10/s and 3 s at 30/s
    assert last["arrival_rate"] == pytest.approx(22.0)
    assert last["target_rate"] == pytest.approx(22.0, abs=0.5)  # like for like (the instantaneous target is 30)
    assert last["recent_n"] == 11 and last["recent_e2e_p99_ms"] == pytest.approx(20.0)  # the 2 s spike is forgotten
