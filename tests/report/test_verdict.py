"""What a reader concludes from the top of a page: the verdict, why a run failed, and what the page could not show.

Issue 30: a run with 73 × "HTTP 500: injected fault" showed only "http_error" in a legend,
"Thresholds: none set" above a failing default row, a black error-rate card and the word
"valid" in green; a vision run lost its target line and SLO section without a word.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from surgelab.server.process import ServerProcess


@pytest.fixture(scope="module")
def failing_server():
    with ServerProcess(["--seed", "7", "--model", "surgelab-test", "--error-rate", "60%"], profile="tiny") as server:
        yield server


@pytest.fixture(scope="module")
def failing_run(failing_server, tmp_path_factory, scenario_maker, surgelab_cli) -> Path:
    """No thresholds of its own: the default error bound fails, so `surgelab run` exits 1."""
    tmp = tmp_path_factory.mktemp("failing")
    scenario = scenario_maker(tmp / "s.yaml", failing_server.base_url, rate=20, duration="2s", warmup="0s", mix=False)
    data = yaml.safe_load(scenario.read_text())
    del data["thresholds"]
    scenario.write_text(yaml.safe_dump(data))
    done = surgelab_cli("run", str(scenario), "--out", str(tmp / "run"), "-q", "--no-preflight")
    assert done.returncode == 1, done.stdout + done.stderr
    return tmp / "run"


def _open(browser, path: Path):
    page = browser(offline=True).new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_function("window.SURGELAB_READY === true", timeout=20_000)
    assert errors == []
    return page


def test_a_failed_run_says_why_at_the_top(failing_run, browser, narrow):
    summary = json.loads((failing_run / "summary.json").read_text())
    [bound] = summary["thresholds"]
    assert bound["default"] and not bound["passed"]
    page = _open(browser, failing_run / "report.html")
    banner = " ".join(page.inner_text(".banner").split())
    assert banner.startswith("FAIL surgelab run exit 1 · stop: completed")
    assert f"first failing bound: error_rate < 10% (default) failed: observed {bound['observed']:.3%}" in banner
    assert "fail" in page.get_attribute(".banner", "class").split()
    # the default bound is counted and said, never "none set" above its failing row
    assert page.inner_text("#card-thresholds .value") == "0/1 pass"
    assert "1 default" in page.inner_text("#card-thresholds")
    assert "bad" in page.get_attribute("#card-thresholds", "class").split()
    assert page.inner_text("#thresholds-table").count("error_rate < 10% (default)") == 1
    assert "bad" in page.get_attribute("#card-error_rate", "class").split()  # red: its bound failed
    # the failures table: the target's own words and the count summary.json has, with when they began and ended
    top = summary["errors"][0]
    cells = page.evaluate("Array.from(document.querySelectorAll('#failures-table tr')[1].cells).map(c => c.innerText)")
    assert cells[:4] == ["http_error", "500", "HTTP 500: injected fault: internal error", f"{top['count']:,}"]
    assert top["count"] == summary["requests"]["by_state"]["http_error"] > 0
    assert float(cells[4]) <= float(cells[5]) <= summary["wall_s"]
    assert page.inner_text("#failures .hint").startswith("Diagnosis: ")
    assert summary["diagnosis"][0] in page.inner_text("#failures")
    # one request class, one tier, one phase: no "Breakdowns" heading over nothing
    assert all(not h.startswith("Breakdowns") for h in page.locator("h2").all_inner_texts())
    narrow(page)


def test_a_vision_run_keeps_its_target_line_and_slo(tiny_server, tmp_path, surgelab_cli, scenario_maker, browser):
    """``images.tokens`` is a setting, not a credential: the stored scenario validates and the report is whole."""
    pytest.importorskip("PIL")
    scenario = scenario_maker(tmp_path / "v.yaml", tiny_server.base_url, rate=10, duration="1s", warmup="0s", mix=False)
    data = yaml.safe_load(scenario.read_text())
    data["workload"] = {"kind": "vision", "prompt_tokens": 20, "output_tokens": 4,
                        "images": {"count": 1, "width": 64, "height": 64, "tokens": "qwen2vl"}}  # fmt: skip
    data["slo"] = {"ttft": "2s"}
    scenario.write_text(yaml.safe_dump(data))
    done = surgelab_cli("run", str(scenario), "--out", str(tmp_path / "run"), "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    run = tmp_path / "run"
    assert yaml.safe_load((run / "scenario.yaml").read_text())["workload"]["images"]["tokens"] == "qwen2vl"
    assert surgelab_cli("validate", str(run / "scenario.yaml")).returncode == 0
    page = _open(browser, run / "report.html")
    assert "target (req/s)" in page.evaluate("window.SURGELAB_CHARTS['chart-load'].traces")
    assert page.inner_text("#slo-line").startswith("SLO: TTFT ≤ 2,000 ms")
    assert page.locator(".problem").count() == 0
    assert page.inner_text(".banner").startswith("PASS")
    # a run stored before the fix: its redacted setting is dropped (it takes its default), the report is whole,
    # and the page says in red what it read differently
    old = tmp_path / "old"
    shutil.copytree(run, old)
    text = (old / "scenario.yaml").read_text()
    (old / "scenario.yaml").write_text(text.replace("tokens: qwen2vl", "tokens: <redacted>"))
    assert surgelab_cli("report", str(old)).returncode == 0
    page = _open(browser, old / "report.html")
    said = page.inner_text(".problem")
    assert said.startswith("Not shown: scenario.yaml does not load as stored") and "(workload.images.tokens)" in said
    assert page.inner_text("#slo-line").startswith("SLO: TTFT ≤ 2,000 ms")
    # a stored scenario that does not load at all: the page says in red what it leaves out, never silently less
    broken = tmp_path / "broken"
    shutil.copytree(run, broken)
    (broken / "scenario.yaml").write_text(text.replace("tokens: qwen2vl", "tokens: [unclosed"))
    assert surgelab_cli("report", str(broken)).returncode == 0
    page = _open(browser, broken / "report.html")
    said = page.inner_text(".problem")
    assert said.startswith("Not shown: scenario.yaml does not load (") and "target line" in said and "SLO" in said
    assert page.evaluate("getComputedStyle(document.querySelector('.problem')).color") == "rgb(185, 28, 28)"
    assert page.locator("#slo-line").count() == 0
    assert "target (req/s)" not in page.evaluate("window.SURGELAB_CHARTS['chart-load'].traces")


def test_the_dashboard_ends_with_the_same_banner_and_failures(failing_run, browser, narrow):
    """After the run the live page said "Run finished (completed): valid · no thresholds set" for a run that
    exited 1: the default bound, the exit status and the 500s were nowhere on it."""
    from surgelab.dashboard import Dashboard, DashboardSettings

    summary = json.loads((failing_run / "summary.json").read_text())
    board = Dashboard(DashboardSettings(linger_s=0.0))
    board.finish(summary)
    url = board.start()
    try:
        page = browser().new_page()
        page.goto(url)
        page.wait_for_function("window.SURGELAB_DASH.verdict !== null", timeout=10_000)
        banner = " ".join(page.inner_text("#verdict .banner").split())
        assert banner.startswith("FAIL surgelab run exit 1 · stop: completed")
        assert "first failing bound: error_rate < 10% (default) failed" in banner
        top = summary["errors"][0]
        row = page.evaluate(
            "Array.from(document.querySelectorAll('#verdict #failures-table tr')[1].cells).map(c => c.innerText)"
        )
        assert row[:4] == ["http_error", "500", top["pattern"], f"{top['count']:,}"]
        assert summary["diagnosis"][0] in page.inner_text("#verdict")
        narrow(page)
    finally:
        board.stop()
