"""The live dashboard's stop button: a click stops the run as Ctrl-C does, and only the page itself can.

The browser test clicks the button of a 30-second run in a real Chromium and finds the run ended
within seconds with Ctrl-C's exit status and the button's reason, every scheduled request in one
recorded state and the report written. The HTTP tests hold the button's guard: the per-run stop
token the page carries, and this dashboard's own origin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from surgelab.dashboard import Dashboard, DashboardSettings
from surgelab.dashboard.server import STOP_REASON


def test_the_stop_button_stops_the_run_as_ctrl_c(
    tiny_server, browser, tmp_path, scenario_maker, reconciled, dashboard_url
):
    scenario = scenario_maker(tmp_path / "long.yaml", tiny_server.base_url, rate=20, duration="30s", warmup="0.5s")
    out = tmp_path / "stopped"
    command = [sys.executable, "-m", "surgelab", "run", str(scenario), "--out", str(out), "-q", "--dashboard"]
    context = browser()
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip
    try:
        url = dashboard_url(process)
        page = context.new_page()
        page.goto(url)
        page.wait_for_function("SURGELAB_DASH.last && SURGELAB_DASH.last.elapsed_s >= 2", timeout=15_000)
        button = page.locator("#stop-run")
        assert button.is_enabled() and button.inner_text() == "Stop the run"
        asked: list[str] = []
        page.on("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
        button.click()
        page.wait_for_function("document.getElementById('stop-run').textContent !== 'Stop the run'", timeout=5_000)
        assert asked and asked[0].startswith("Stop the run now?")
        assert process.wait(timeout=20) == 130, process.stderr.read()  # type: ignore[union-attr]  # Ctrl-C's status
        assert time.monotonic() - started < 25, "the 30 s run ended at the click, not at its end"
        page.wait_for_function("window.SURGELAB_DASH.verdict !== null", timeout=5_000)
        banner = " ".join(page.inner_text("#verdict .banner").split())
        assert banner.startswith("INTERRUPTED surgelab run exit 130") and STOP_REASON in banner
        assert page.inner_text("#stop-run") == "Stopped" and page.locator("#stop-run").is_disabled()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stop_reason"] == STOP_REASON
    assert summary["duration_s"] < 20
    reconciled(summary, out)  # every scheduled request in exactly one recorded state, totals add up
    assert (out / "report.html").is_file()
    assert STOP_REASON in process.stderr.read()  # type: ignore[union-attr]  # said in the terminal, as Ctrl-C is


def _post(url: str, headers: dict[str, str]) -> tuple[int, dict]:
    request = urllib.request.Request(url, method="POST", headers=headers, data=b"")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def board():
    dashboard = Dashboard(DashboardSettings(title="guard"))
    dashboard.start()
    yield dashboard
    dashboard.stop()


def test_only_the_dashboards_own_page_can_stop_the_run(board):
    stops: list[str] = []
    stop_url = board.url.split("?")[0] + "api/stop"
    own = {"X-Surgelab-Stop": board.stop_token}
    assert f'data-token="{board.stop_token}"' in urllib.request.urlopen(board.url, timeout=5).read().decode()
    assert _post(stop_url, own)[0] == 409, "no run under way: nothing to stop"
    board.attach_stop(lambda reason: stops.append(reason) or True)
    origin = board.url.split("/?")[0].rstrip("/")
    for refused in (
        {},  # a form or a plain fetch: no stop token
        {"X-Surgelab-Stop": "guessed"},
        {**own, "Origin": "http://evil.example"},
        {**own, "Origin": origin, "Sec-Fetch-Site": "cross-site"},
        {**own, "Host": "rebound.example:80"},
    ):
        assert _post(stop_url, refused)[0] == 403, refused
    assert stops == []
    assert _post(stop_url, {**own, "Origin": origin, "Sec-Fetch-Site": "same-origin"}) == (
        202,
        {"stopping": STOP_REASON},
    )
    assert _post(stop_url, own) == (202, {"stopping": STOP_REASON}), "asked once: the run is stopping"
    assert stops == [STOP_REASON]
    state = json.loads(urllib.request.urlopen(board.url.split("?")[0] + "api/state", timeout=5).read())
    assert state["stop_requested"] == STOP_REASON
