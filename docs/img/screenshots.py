"""Regenerate docs/img: every page from runs made with the commands the docs give, in headless Chromium.

    python docs/img/screenshots.py [--out docs/img]     # about 3 minutes; Debian's chromium, playwright

The runs go to a scratch directory (kept, its path printed): the README's quickstart against the
embedded Llama-3-8B/H100 server with ``--dashboard`` (run page, and the dashboard mid-run and after),
its sweep and plan (README "Sweep → plan"), the simulated flash sale with a 30 s cold start
(docs/simulator.md, "Outputs") and the simulated batching A/B (docs/batching.md). Each page is shot
at 1440 and 1024 wide (900 high), cut at its first ``CUT`` pixels and quantised to 96 colours.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from PIL import Image
from playwright.sync_api import Page, sync_playwright

from surgelab.server.process import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("SURGELAB_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
WIDTHS, HEIGHT, COLOURS = (1440, 1024), 900, 96
CUT = {
    "run": 2600,
    "sweep": 1900,
    "plan": 2200,
    "simulation": 2600,
    "simulation-fleet": 1500,
    "compare": 2200,
    "dashboard": 1700,
}
FROM = {"simulation-fleet": "#cold-start"}  # shots that start at an element (80 px above it), not at the top


def surgelab(cwd: Path, command: str) -> None:
    """One documented command, as the docs write it (its output goes to the terminal)."""
    print("$", command, flush=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "100"}
    subprocess.run([sys.executable, "-m", *shlex.split(command)], cwd=cwd, env=env, check=False)


def save(page: Page, path: Path, cut: int, start: str | None = None) -> None:
    """``cut`` pixels of the page from its top (or from 80 px above ``start``), quantised: a PNG that stays small."""
    top = max(0, page.locator(start).bounding_box()["y"] - 80) if start else 0
    height = min(cut, page.evaluate("document.documentElement.scrollHeight") - top)
    clip = {"x": 0, "y": top, "width": page.viewport_size["width"], "height": height}
    page.screenshot(path=str(path), full_page=True, clip=clip)
    Image.open(path).convert("RGB").quantize(COLOURS).save(path, optimize=True)
    print(f"  {path.name}: {path.stat().st_size // 1024} KB", flush=True)


def shoot_file(new_page: Callable[[int], Page], html: Path, name: str, out: Path) -> None:
    for width in WIDTHS:
        page = new_page(width)
        page.goto(html.as_uri())
        page.wait_for_function("window.SURGELAB_READY === true", timeout=60_000)
        save(page, out / f"{name}-{width}.png", CUT[name], FROM.get(name))
        page.close()


def dashboard_url(process: subprocess.Popen, timeout: float = 30.0) -> str:
    found: list[str] = []

    def read() -> None:
        for line in process.stdout:  # type: ignore[union-attr]
            if line.startswith("dashboard: "):
                found.append(line.split(" ", 1)[1].strip())
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    if not found:
        raise SystemExit("surgelab run --dashboard printed no URL")
    return found[0]


def quickstart_with_dashboard(new_page: Callable[[int], Page], work: Path, url: str, out: Path) -> None:
    """README's quickstart (20 s, 5 s warm-up) with --dashboard: the page mid-run, and after the run."""
    command = [sys.executable, "-m", "surgelab", "run", "examples/quickstart.yaml", "--url", url, "--duration", "20s",
               "--warmup", "5s", "--out", "runs/quickstart", "--dashboard"]  # fmt: skip
    print("$ surgelab", " ".join(command[3:]), flush=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(command, cwd=work, env=env, stdout=subprocess.PIPE, text=True)
    link = dashboard_url(process)
    pages = {width: new_page(width) for width in WIDTHS}
    for page in pages.values():
        page.goto(link)
    mid_run = "window.SURGELAB_DASH.last && window.SURGELAB_DASH.last.elapsed_s >= 14"
    pages[WIDTHS[0]].wait_for_function(mid_run, timeout=60_000)
    for width, page in pages.items():
        save(page, out / f"dashboard-{width}.png", CUT["dashboard"])
    process.wait(timeout=120)
    for width, page in pages.items():
        page.wait_for_function("window.SURGELAB_DASH.verdict !== null", timeout=20_000)
        save(page, out / f"dashboard-final-{width}.png", CUT["dashboard"])
        page.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    out = parser.parse_args().out.resolve()
    work = Path(tempfile.mkdtemp(prefix="surgelab-screenshots-"))
    (work / "examples").symlink_to(ROOT / "examples")
    print(f"runs in {work}", flush=True)
    with ServerProcess(profile="llama3-8b-h100") as server, sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)

        def new_page(width: int) -> Page:
            return browser.new_page(viewport={"width": width, "height": HEIGHT})

        quickstart_with_dashboard(new_page, work, server.base_url, out)
        shoot_file(new_page, work / "runs/quickstart/report.html", "run", out)
        surgelab(work, "surgelab sweep examples/quickstart.yaml --serve llama3-8b-h100 --max-num-seqs 16 --start 2 "
                       "--max 64 --hold 10s --settle 2s --warmup 5s --out runs/sweep-qs -q")  # fmt: skip
        surgelab(work, "surgelab plan runs/sweep-qs --peak 100 --spares 1 --gpu-hour-cost 2.5 --out runs/plan-qs")
        surgelab(work, "surgelab report runs/sweep-qs")
        shoot_file(new_page, work / "runs/sweep-qs/report.html", "sweep", out)
        shoot_file(new_page, work / "runs/plan-qs/plan.html", "plan", out)
        surgelab(
            work,
            "surgelab simulate examples/flash-sale.yaml --fleet examples/fleets/autoscale-30s-start.yaml --out runs/flash",
        )
        shoot_file(new_page, work / "runs/flash/report.html", "simulation", out)
        shoot_file(new_page, work / "runs/flash/report.html", "simulation-fleet", out)
        surgelab(work, "surgelab simulate examples/batching-ab.yaml --fleet examples/fleets/batch-4.yaml "
                       "--fleet examples/fleets/batch-32.yaml --out runs/batching-sim")  # fmt: skip
        surgelab(work, "surgelab compare runs/batching-sim/batch-4 runs/batching-sim/batch-32 --out runs/batching-ab")
        shoot_file(new_page, work / "runs/batching-ab/compare.html", "compare", out)
        browser.close()


if __name__ == "__main__":
    main()
