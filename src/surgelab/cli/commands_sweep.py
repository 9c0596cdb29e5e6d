"""``surgelab sweep``: a stepped test → knee and SLA capacity (``surgelab plan`` turns it into a fleet)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError
from rich.console import Console

from surgelab.cli import app
from surgelab.cli.common import (
    announce_end,
    fail,
    inputs_or_exit,
    load_or_exit,
    ratio_option,
    seconds_option,
    start_dashboard,
    warn,
)


def _levels(text: str | None) -> list[float] | None:
    if text is None:
        return None
    try:
        return [float(v) for v in text.replace(" ", "").split(",") if v]
    except ValueError:
        raise fail(f"--levels: expected numbers separated by commas, e.g. 1,2,4,8, got {text!r}") from None


def _validation(exc: ValidationError) -> str:
    parts = []
    for e in exc.errors():
        where = ".".join(str(p) for p in e["loc"]) or "sweep"
        parts.append(f"{where}: {e['msg'].removeprefix('Value error, ')}")
    return "; ".join(parts)


@contextlib.contextmanager
def _maybe_serve(profile: str | None, args: list[str]) -> Iterator[str | None]:
    if profile is None:
        yield None
        return
    from surgelab.server.process import ServerProcess, ServerStartError

    try:
        server = ServerProcess(args, profile=profile)
        server.__enter__()
    except ServerStartError as exc:
        raise fail(str(exc).splitlines()[0]) from None
    try:
        yield server.base_url
    finally:
        server.__exit__()


@app.command("sweep")
def sweep(
    scenario_file: Path = typer.Argument(..., metavar="SCENARIO", help="Scenario YAML: its target, workload and SLOs."),
    out: Path | None = typer.Option(None, help="Sweep directory (default runs/sweep-<name>-<time>); must be empty."),
    mode: str | None = typer.Option(None, help="concurrency (users) or rate (req/s); default: the scenario's loop."),
    levels: str | None = typer.Option(None, help="Explicit levels, e.g. 1,2,4,8,16 (overrides the spacing)."),
    spacing: str = typer.Option(
        "geometric", help="linear, geometric or adaptive (coarse, then finer around the knee)."
    ),
    start: float = typer.Option(1.0, help="First level."),
    step: float = typer.Option(1.0, help="Linear spacing: added per level."),
    factor: float = typer.Option(2.0, help="Geometric/adaptive spacing: multiplied per level."),
    max_level: float = typer.Option(256.0, "--max", help="Highest level to try."),
    max_levels: int = typer.Option(20, help="Most levels run, refinement included."),
    refine: int = typer.Option(3, help="Adaptive: extra levels around the coarse knee."),
    hold: str = typer.Option("60s", help="Measured time per level."),
    settle: str = typer.Option("10s", help="Time at the start of each level excluded from its statistics."),
    ramp_up: str = typer.Option(
        "0s", help="Users of each level start evenly spread over this time (at most --settle); default all at once."
    ),
    warmup: str = typer.Option("30s", help="Load at the first level before the sweep (not reported); 0 to skip."),
    max_error_rate: str = typer.Option("5%", help="Stop after a level with a higher error rate."),
    slo_multiple: float = typer.Option(3.0, help="Stop after a level whose P99 exceeds this multiple of an SLO."),
    falling_levels: int = typer.Option(2, help="Stop when throughput fell this many levels in a row (0: never)."),
    stop_when: list[str] | None = typer.Option(
        None, help="Another stop condition, e.g. 'p99(e2e) > 30s' (repeatable)."
    ),
    sla_percentile: str = typer.Option("p99", help="Percentile the SLOs are judged at for the SLA capacity."),
    sla_max_error_rate: str = typer.Option("1%", help="SLA capacity: highest level with errors at most this."),
    break_at: float | None = typer.Option(
        None, help="Breaking phase at this multiple of the expected peak (off by default)."
    ),
    expected_peak: float | None = typer.Option(
        None, help="Breaking phase: the expected peak level (default: the knee)."
    ),
    break_hold: str = typer.Option("30s", help="Breaking phase: time at the break load."),
    recovery: str = typer.Option("30s", help="Breaking phase: time after the drop, watching recovery."),
    url: str | None = typer.Option(None, help="Override the scenario's target URL."),
    model: str | None = typer.Option(None, help="Override the scenario's model name."),
    serve: str | None = typer.Option(
        None, help="Start the embedded server with this profile (name or file) and sweep it."
    ),
    max_num_seqs: int | None = typer.Option(None, help="With --serve: the server's running-batch limit."),
    fleet: Path | None = typer.Option(
        None, "--fleet", help="Run every level on this simulated fleet (YAML) in virtual time instead of a server."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only the final table."),
    dashboard: bool = typer.Option(False, "--dashboard", help="Serve the live dashboard on 127.0.0.1 (URL printed)."),
    dashboard_port: int = typer.Option(0, help="Dashboard port (0: any free port)."),
    dashboard_token: str | None = typer.Option(None, help="Dashboard access token, required as ?token=... in the URL."),
    preflight: bool | None = typer.Option(
        None,
        "--preflight/--no-preflight",
        help="Check the target (its /models and one request) before the first level; on by default.",
    ),
) -> None:
    """Stepped load test: warm up, hold each level, stop on its own, report knee and SLA capacity."""
    from surgelab.aio import run_async
    from surgelab.metrics.rundir import RunDirError
    from surgelab.runner.preflight import EXIT_PREFLIGHT, PreflightFailed
    from surgelab.sweep import BreakConfig, StopRules, SweepConfig, SweepError, run_sweep
    from surgelab.sweep.table import print_sweep

    overrides: dict[str, tuple[str, Any]] = {}
    if url is not None:
        overrides["target.url"] = ("--url", url)
    if model is not None:
        overrides["target.model"] = ("--model", model)
    if preflight is not None:
        overrides["preflight"] = ("--preflight" if preflight else "--no-preflight", preflight)
    base = load_or_exit(scenario_file, overrides)
    inputs_or_exit(base, scenario_file, warn)
    if base.load is None:
        raise fail(f"{scenario_file}: a sweep needs a scenario with a single load (not phases)")
    simulated = None
    if fleet is not None:
        from surgelab.sim import FleetError, load_fleet

        if serve is not None:
            raise fail("--fleet simulates the levels: it cannot be combined with --serve")
        try:
            simulated = load_fleet(fleet)
        except FleetError as exc:
            raise fail(str(exc)) from None
    try:
        config = SweepConfig(
            mode=mode or ("rate" if base.load.mode == "open" else "concurrency"),
            spacing=spacing, levels=_levels(levels), start=start, step=step, factor=factor, max=max_level,
            max_levels=max_levels, refine=refine, hold=seconds_option(hold, "--hold"), settle=seconds_option(settle, "--settle"),
            ramp_up=seconds_option(ramp_up, "--ramp-up"),
            warmup=seconds_option(warmup, "--warmup"), sla_percentile=sla_percentile,
            sla_max_error_rate=ratio_option(sla_max_error_rate, "--sla-max-error-rate"),
            stop=StopRules(
                max_error_rate=ratio_option(max_error_rate, "--max-error-rate"), slo_multiple=slo_multiple,
                falling_levels=falling_levels, stop_when=list(stop_when or []),
            ),
            breaking=None if break_at is None else BreakConfig(
                multiple=break_at, expected_peak=expected_peak, hold=seconds_option(break_hold, "--break-hold"),
                recovery=seconds_option(recovery, "--recovery"),
            ),
        )  # fmt: skip
    except ValidationError as exc:
        raise fail(_validation(exc)) from None
    out = out or Path(f"runs/sweep-{base.name}-{datetime.now():%Y%m%d-%H%M%S}")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise fail(f"{out} is not an empty directory; choose another --out")
    console = Console()
    say = (lambda _m: None) if quiet else (lambda m: console.print(m, highlight=False))
    args = ["--max-num-seqs", str(max_num_seqs)] if max_num_seqs is not None else []
    if base.target.model:  # the embedded server stands in for the scenario's target: it serves that model name
        args += ["--model", base.target.model]
    with _maybe_serve(serve, args) as served_url:
        if served_url is not None:
            base = load_or_exit(scenario_file, {**overrides, "target.url": ("--serve", served_url)})
            say(f"embedded server (profile {serve}) at {served_url}")
        if simulated is not None:
            say(f"simulated fleet {simulated.name} ({fleet}): every level in virtual time, no server contacted")
        board = start_dashboard(base, dashboard_port, dashboard_token) if dashboard else None
        try:
            result = run_async(
                run_sweep(
                    base,
                    config,
                    out,
                    on_status=say,
                    handle_signals=True,
                    on_level=lambda row: _each_level(row, quiet, say, config.unit, board),
                    observers=[board] if board is not None else [],
                    fleet=simulated,
                    served_error=_served_error(serve),
                )  # fmt: skip
            )
            announce_end([board] if board is not None else [], _sweep_verdict(result))
        except (SweepError, RunDirError) as exc:
            raise fail(str(exc)) from None
        except PreflightFailed as exc:
            raise fail(f"pre-flight: {exc} (--no-preflight skips this check)", EXIT_PREFLIGHT) from None
        except KeyboardInterrupt:  # between levels; sweep.json already holds every finished level
            raise fail(f"interrupted; finished levels are in {out}/sweep.json", 130) from None
        finally:
            if board is not None:
                board.stop()
    print_sweep(result, console)
    console.print(f"sweep directory: {out} (sweep.json, sweep.parquet, level-NN/)", highlight=False, soft_wrap=True)
    if result.stop_reason.startswith("interrupted"):
        raise typer.Exit(130)


def _sweep_verdict(result: Any) -> dict[str, Any]:
    """The sweep's end as the dashboard's verdict: every level valid, and the SLA capacity found or not."""
    from surgelab.analysis.verdict import sweep_verdict

    reasons = [f"level {r.offered:g}: {'; '.join(r.validity_reasons)}" for r in result.levels if not r.valid]
    cap = result.sla_capacity
    objective = ", ".join(result.slo) or "the error limit"
    said = f"SLA capacity {cap['requests_per_s']:.4g} req/s at {cap['level']:g} {result.unit}" if cap else f"no level met {objective}"
    return {"banner": sweep_verdict(said if cap else None, objective, reasons, result.stop_reason),
            "validity": {"valid": not reasons, "reasons": reasons},
            "thresholds": [{"expr": said, "passed": cap is not None}], "thresholds_passed": cap is not None,
            "stop_reason": result.stop_reason}  # fmt: skip


def _each_level(row: Any, quiet: bool, say: Any, unit: str, board: Any) -> None:
    """A finished level: a line in the terminal, a point on the dashboard's live curve."""
    from surgelab.sweep.table import level_line

    if not quiet:
        say(level_line(row, unit))
    if board is not None:
        board.on_level(row)


def _served_error(profile: str | None):
    """The engine model's measured error for the profile ``--serve`` runs (None without one, or for coefficients)."""
    if profile is None:
        return None
    from surgelab.engine import load_profile
    from surgelab.engine.accuracy import error_bar

    return error_bar(load_profile(profile))
