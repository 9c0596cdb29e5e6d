"""Shared pieces for report tests: embedded servers, runs made through the real CLI, a real Chromium.

The browser is Debian's ``chromium`` driven by Playwright's driver (never a downloaded browser);
each test gets a fresh ``--user-data-dir``. Screenshots land in ``$SURGELAB_SCREENSHOT_DIR`` when
set, else in the session's temporary directory (the path is printed).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from surgelab.server.process import ServerProcess

CHROMIUM = os.environ.get("SURGELAB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


@pytest.fixture(scope="session")
def tiny_server() -> Iterator[ServerProcess]:
    with ServerProcess(["--seed", "7", "--model", "surgelab-test"], profile="tiny") as server:
        yield server


@pytest.fixture(scope="session")
def h100_server() -> Iterator[ServerProcess]:
    """A server with realistic step times (Llama-3-8B on an H100): latencies far above loopback noise."""
    with ServerProcess(["--seed", "7", "--model", "surgelab-test"], profile="llama3-8b-h100") as server:
        yield server


def surgelab(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "160"}
    return subprocess.run([sys.executable, "-m", "surgelab", *args], capture_output=True, text=True, timeout=timeout, env=env)


def scenario_file(path: Path, url: str, *, rate: float = 30, duration: str = "3s", warmup: str = "0.5s",
                  output_tokens: int = 8, mix: bool = True) -> Path:  # fmt: skip
    """An open-loop scenario with two request classes in two tiers (so breakdowns have content)."""
    data: dict = {
        "name": "report-test",
        "seed": 11,
        "target": {"url": url, "model": "surgelab-test"},
        "load": {"rate": rate, "arrival": "poisson", "duration": duration, "warmup": warmup},
        "workload": {"prompt_tokens": 32, "output_tokens": output_tokens},
        "thresholds": ["p99(ttft) < 5s", "error_rate < 50%"],
    }
    if mix:
        data["tiers"] = {"paid": {"slo": {"ttft": "1s"}}, "free": {"slo": {"ttft": "3s"}}}
        data["workload"]["mix"] = [
            {"name": "chat", "weight": 3, "tier": "free"},
            {"name": "summarize", "weight": 1, "tier": "paid", "prompt_tokens": 128, "output_tokens": 16},
        ]
    path.write_text(yaml.safe_dump(data))
    return path


def make_run(tmp: Path, server: ServerProcess, name: str, *extra: str, **kw) -> Path:
    out = tmp / name
    scenario = scenario_file(tmp / f"{name}.yaml", server.base_url, **kw)
    result = surgelab("run", str(scenario), "--out", str(out), "-q", *extra)
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def read_dashboard_url(process: subprocess.Popen, timeout: float = 20.0) -> str:
    """The URL ``surgelab run --dashboard`` prints first (read on a thread: a bounded wait)."""
    found: list[str] = []

    def reader() -> None:
        for line in process.stdout:  # type: ignore[union-attr]
            if line.startswith("dashboard: "):
                found.append(line.split(" ", 1)[1].strip())
                return

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    thread.join(timeout)
    assert found, "no dashboard URL printed"
    return found[0]


@pytest.fixture(scope="session")
def dashboard_url():
    """``dashboard_url(process)``: the dashboard's URL as a ``surgelab run --dashboard`` child printed it."""
    return read_dashboard_url


@pytest.fixture(scope="session")
def surgelab_cli():
    """``surgelab_cli(*args)``: the command line as a subprocess (exit code, stdout, stderr)."""
    return surgelab


@pytest.fixture(scope="session")
def scenario_maker():
    """``scenario_maker(path, url, **options)``: a scenario file (two classes in two tiers by default)."""
    return scenario_file


@pytest.fixture(scope="session")
def run_maker():
    """``run_maker(tmp, server, name, *flags, **scenario)``: a run directory made by ``surgelab run``."""
    return make_run


@pytest.fixture(scope="session")
def screenshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = Path(os.environ.get("SURGELAB_SCREENSHOT_DIR") or tmp_path_factory.mktemp("screenshots"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")  # Playwright's sync API holds a running event loop: never past this module
def playwright_driver() -> Iterator[object]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (test extra) is not installed")
    if not shutil.which(CHROMIUM) and not Path(CHROMIUM).exists():
        pytest.skip(f"chromium not found at {CHROMIUM} (apt-get install chromium)")
    with sync_api.sync_playwright() as driver:
        yield driver


@pytest.fixture
def browser(playwright_driver) -> Iterator:
    """A fresh persistent Chromium context (its own user-data-dir); ``browser(offline=True)`` blocks the network."""
    contexts = []

    def launch(offline: bool = False):
        user_data = tempfile.mkdtemp(prefix="surgelab-chromium-")
        try:
            ctx = playwright_driver.chromium.launch_persistent_context(
                user_data, executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True, offline=offline,
                viewport={"width": 1280, "height": 900},
            )  # fmt: skip
        except Exception as exc:  # pragma: no cover - depends on the machine
            pytest.skip(f"chromium cannot start: {str(exc).splitlines()[0]}")
        contexts.append((ctx, user_data))
        return ctx

    yield launch
    for ctx, user_data in contexts:
        ctx.close()
        shutil.rmtree(user_data, ignore_errors=True)


NARROW = 390  # a phone's width (an iPhone 12–15); the layout holds down to 360


def overflow_at(page, width: int = NARROW) -> dict:
    """At ``width`` px: how wide the document is, and any element wider than the viewport outside a scroll box."""
    page.set_viewport_size({"width": width, "height": 844})
    page.evaluate("""async () => {  // every chart takes its new width before anything is measured
        const charts = Array.from(document.querySelectorAll('.js-plotly-plot'));
        await Promise.all(charts.map(d => Plotly.Plots.resize(d)));
    }""")
    return page.evaluate("""(w) => {
        const wide = Array.from(document.querySelectorAll('main *, header *')).filter(e => {
            if (e.closest('.scroll, pre')) return false;  // tables and artefacts scroll inside their own box
            const r = e.getBoundingClientRect(); return r.width > 0 && (r.right > w + 1 || r.left < -1);
        }).slice(0, 5).map(e => e.tagName + '#' + e.id + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right));
        return {width: document.documentElement.scrollWidth, wide: wide};
    }""", width)


@pytest.fixture(scope="session")
def narrow():
    """``narrow(page)``: the page at 390 px wide; asserts nothing sticks out and returns the measure."""

    def check(page, width: int = NARROW) -> dict:
        seen = overflow_at(page, width)
        assert seen["width"] <= width and not seen["wide"], seen
        return seen

    return check
