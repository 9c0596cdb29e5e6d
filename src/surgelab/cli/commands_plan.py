"""``surgelab little``: concurrency arithmetic before any test."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from surgelab.cli import app
from surgelab.cli.commands_run import fail, seconds_option


@app.command("little")
def little(
    rate: float | None = typer.Option(None, help="Arrival rate λ, requests per second."),
    latency: str | None = typer.Option(None, help="Mean response time W, e.g. 2s or 800ms."),
    in_flight: float | None = typer.Option(None, help="Mean requests in flight L."),
    users: int | None = typer.Option(None, help="Closed loop: number of users N (with --latency)."),
    think: str | None = typer.Option(None, help="Closed loop: mean think time Z between a response and the next request."),
) -> None:
    """Little's Law both ways: L = λ·W (give two, get the third), or X = N ÷ (W + Z) for users."""
    from surgelab.plan.little import solve_closed, solve_open

    console = Console()
    w, z = seconds_option(latency, "--latency"), seconds_option(think, "--think")
    try:
        if users is not None:
            if w is None:
                raise ValueError("--users needs --latency (and optionally --think)")
            r = solve_closed(users, w, z or 0.0)
            console.print(
                f"{users} users × 1 request per ({w:g}s response + {r.think:g}s think) → "
                f"[bold]{r.rate:.3g} req/s[/], {r.in_flight:.3g} in flight on average (L = λ·W)"
            )
            return
        r = solve_open(rate, w, in_flight)
    except ValueError as exc:
        raise fail(str(exc)) from None
    console.print(
        f"λ = [bold]{r.rate:.4g} req/s[/] · W = [bold]{r.latency:.4g} s[/] → L = [bold]{r.in_flight:.4g}[/] requests in flight"
    )
    console.print(
        f"a server must hold {r.in_flight:.4g} concurrent requests on average; peaks are higher — "
        "size for the peak rate, not the daily mean."
    )


@app.command("preview")
def preview(
    scenario_file: Path = typer.Argument(..., metavar="SCENARIO"),
    latency: str = typer.Option("2s", help="Assumed response time W for the expected in-flight count."),
    html: Path | None = typer.Option(None, help="Also write a self-contained HTML page with the charts."),
) -> None:
    """Show what a scenario will send — load over time, mix, token lengths, expected in flight — without sending."""
    from surgelab.cli.commands_run import load_or_exit
    from surgelab.report.preview import compute_preview, render_html, render_terminal

    scenario = load_or_exit(scenario_file, {})
    data = compute_preview(scenario, seconds_option(latency, "--latency") or 0.0)
    render_terminal(data, Console())
    if html is not None:
        html.write_text(render_html(data), encoding="utf-8")
        Console().print(f"wrote {html}")


@app.command("calibrate")
def calibrate(
    workers: int = typer.Option(1, min=1, max=64, help="Worker processes to calibrate for."),
    seconds: float = typer.Option(3.0, help="Duration of each level."),
    start: float = typer.Option(100.0, help="First rate tried (req/s)."),
    show: bool = typer.Option(False, "--show", help="Print the cached figure without measuring."),
) -> None:
    """Measure this machine's load-generation ceiling (streaming, zero-delay server) and cache it."""
    from surgelab.runner.headroom import cache_path, load_calibration, save_calibration
    from surgelab.sweep.calibrate import find_ceiling
    from surgelab.testing.process import scripted_server

    console = Console()
    if show:
        cached = load_calibration(workers)
        console.print(
            f"{cached['ceiling_rps']:.0f} req/s with {workers} worker(s), measured {cached['measured_at']}"
            if cached
            else f"not calibrated for {workers} worker(s) on this machine"
        )
        return

    def report(level) -> None:
        mark = "ok " if level.sustained else "no "
        console.print(f"  {mark} {level.rate:8.0f} req/s → {level.achieved:8.1f} achieved, lag p99 {level.lag_p99_ms:6.2f} ms")

    console.print(f"calibrating with {workers} worker(s) against a zero-delay streaming server on 127.0.0.1 …")
    with scripted_server(lean=True) as url:  # the lean server: its cost per request is a fifth of the scripted one's
        ceiling, levels = find_ceiling(url, workers, seconds, start, on_level=report)
    save_calibration(workers, ceiling, levels)
    console.print(f"client ceiling: [bold]{ceiling:.0f} req/s[/] with {workers} worker(s) (cached in {cache_path()})")
