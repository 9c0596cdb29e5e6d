"""``surgelab sweep`` (stepped test → knee and SLA capacity) and ``surgelab plan`` (capacity → fleet, HPA, alerts)."""

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
from surgelab.cli.commands_run import _dashboard, fail, load_or_exit, parsed_option, seconds_option
from surgelab.units import parse_ratio


def _ratio(value: str | None, flag: str) -> float | None:
    """A ratio flag (``1%``, ``0.01``) as a fraction; a one-line error naming the flag otherwise."""
    return parsed_option(value, flag, parse_ratio)


def _levels(text: str | None) -> list[float] | None:
    if text is None:
        return None
    try:
        return [float(v) for v in text.replace(" ", "").split(",") if v]
    except ValueError:
        raise fail(f"--levels: expected numbers separated by commas, e.g. 1,2,4,8, got {text!r}") from None


def _thresholds(exprs: list[str], flag: str) -> list[Any]:
    from surgelab.conditions import Threshold

    out = []
    for expr in exprs:
        try:
            out.append(Threshold(expr=expr))
        except ValidationError as exc:
            raise fail(f"{flag}: {exc.errors()[0]['msg'].removeprefix('Value error, ')}") from None
    return out


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
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only the final table."),
    dashboard: bool = typer.Option(False, "--dashboard", help="Serve the live dashboard on 127.0.0.1 (URL printed)."),
    dashboard_port: int = typer.Option(0, help="Dashboard port (0: any free port)."),
    dashboard_token: str | None = typer.Option(None, help="Dashboard access token, required as ?token=... in the URL."),
) -> None:
    """Stepped load test: warm up, hold each level, stop on its own, report knee and SLA capacity."""
    from surgelab.aio import run_async
    from surgelab.metrics.rundir import RunDirError
    from surgelab.sweep import BreakConfig, StopRules, SweepConfig, SweepError, run_sweep
    from surgelab.sweep.table import print_sweep

    overrides: dict[str, tuple[str, Any]] = {}
    if url is not None:
        overrides["target.url"] = ("--url", url)
    if model is not None:
        overrides["target.model"] = ("--model", model)
    base = load_or_exit(scenario_file, overrides)
    if base.load is None:
        raise fail(f"{scenario_file}: a sweep needs a scenario with a single load (not phases)")
    try:
        config = SweepConfig(
            mode=mode or ("rate" if base.load.mode == "open" else "concurrency"),
            spacing=spacing, levels=_levels(levels), start=start, step=step, factor=factor, max=max_level,
            max_levels=max_levels, refine=refine, hold=seconds_option(hold, "--hold"), settle=seconds_option(settle, "--settle"),
            warmup=seconds_option(warmup, "--warmup"), sla_percentile=sla_percentile,
            sla_max_error_rate=_ratio(sla_max_error_rate, "--sla-max-error-rate"),
            stop=StopRules(
                max_error_rate=_ratio(max_error_rate, "--max-error-rate"), slo_multiple=slo_multiple,
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
    with _maybe_serve(serve, args) as served_url:
        if served_url is not None:
            base = load_or_exit(scenario_file, {**overrides, "target.url": ("--serve", served_url)})
            say(f"embedded server (profile {serve}) at {served_url}")
        board = _dashboard(base, dashboard_port, dashboard_token) if dashboard else None
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
                )  # fmt: skip
            )
        except (SweepError, RunDirError) as exc:
            raise fail(str(exc)) from None
        except KeyboardInterrupt:  # between levels; sweep.json already holds every finished level
            raise fail(f"interrupted; finished levels are in {out}/sweep.json", 130) from None
        finally:
            if board is not None:
                board.stop()
    print_sweep(result, console)
    console.print(f"sweep directory: {out} (sweep.json, sweep.parquet, level-NN/)", highlight=False, soft_wrap=True)
    if result.stop_reason.startswith("interrupted"):
        raise typer.Exit(130)


def _each_level(row: Any, quiet: bool, say: Any, unit: str, board: Any) -> None:
    """A finished level: a line in the terminal, a point on the dashboard's live curve."""
    from surgelab.sweep.table import level_line

    if not quiet:
        say(level_line(row, unit))
    if board is not None:
        board.on_level(row)


@app.command("plan")
def plan(
    sweep_file: Path | None = typer.Argument(None, metavar="[SWEEP]", help="sweep.json, or the sweep directory."),
    peak: str | None = typer.Option(
        None, help="Forecast peak: requests/s, or a scenario/trace file whose busiest window is used."
    ),
    peak_window: str = typer.Option("60s", help="Window over which a file's peak rate is averaged."),
    capacity: float | None = typer.Option(None, help="Per-instance SLA capacity in req/s, instead of a sweep."),
    slo: list[str] | None = typer.Option(
        None, help="Re-judge the sweep with this SLO, e.g. 'p99(ttft) < 500ms' (repeatable)."
    ),
    max_error_rate: str | None = typer.Option(None, help="Re-judge the sweep with this error-rate limit."),
    safety: float = typer.Option(0.7, help="Fraction of the SLA capacity used at the peak (0.7 = 30% headroom)."),
    spares: int = typer.Option(0, help="k of N+k: instances that may fail at the peak."),
    gpus_per_instance: int = typer.Option(1, help="GPUs per instance."),
    gpu_hour_cost: float | None = typer.Option(None, help="Cost per GPU-hour (any currency)."),
    peak_cv: float = typer.Option(
        0.2, help="Coefficient of variation of the actual peak (lognormal) for the availability table."
    ),
    out: Path | None = typer.Option(None, help="Write plan.json, hpa.yaml and alerts.yaml here."),
    deployment: str = typer.Option("inference", help="HPA: the Deployment to scale."),
    namespace: str | None = typer.Option(None, help="HPA: namespace."),
    hpa_metric: str = typer.Option("inflight", help="HPA metric: inflight (requests running per pod) or rps."),
    hpa_metric_name: str | None = typer.Option(None, help="HPA: the pods metric name as your adapter exposes it."),
    min_replicas: int | None = typer.Option(None, help="HPA minReplicas (default 1 + spares)."),
    queue_model: str | None = typer.Option(
        None, "--model", help="mmc: Erlang C from --rate and --service-time, no sweep."
    ),
    rate: float | None = typer.Option(None, help="--model mmc: arrival rate, req/s."),
    service_time: str | None = typer.Option(None, help="--model mmc: mean service time, e.g. 0.5s."),
    servers: int | None = typer.Option(None, help="--model mmc: number of servers."),
    target_wait: str | None = typer.Option(None, help="--model mmc: find the fewest servers with this mean wait."),
) -> None:
    """Capacity plan: instances = ceil(peak ÷ (SLA capacity × safety)), N+k, cost, HPA, alerts; or Erlang C."""
    from surgelab.conditions import Threshold

    console = Console()
    if queue_model is not None:
        _queueing(queue_model, rate, service_time, servers, target_wait, console)
        return
    from surgelab.plan.capacity import capacity_from_sweep, plan_capacity
    from surgelab.plan.fleet import FleetInputs
    from surgelab.plan.forecast import PeakError, peak_from
    from surgelab.plan.render import print_plan
    from surgelab.sweep import SweepFileError, read_sweep

    if hpa_metric not in ("inflight", "rps"):
        raise fail(f"--hpa-metric: expected inflight or rps, got {hpa_metric!r}")
    if peak is None:
        raise fail("--peak is required: the forecast peak in req/s, or a scenario or trace file")
    if (sweep_file is None) == (capacity is None):
        raise fail("give a sweep (SWEEP argument) or --capacity, not both or neither")
    try:
        forecast = peak_from(peak, seconds_option(peak_window, "--peak-window") or 0.0)
    except PeakError as exc:
        raise fail(str(exc)) from None
    used_slo = _thresholds(slo or [], "--slo")
    sweep_result, in_flight, source = None, None, "given with --capacity"
    if sweep_file is not None:
        try:
            sweep_result = read_sweep(sweep_file)
            slos = used_slo or None
            cap = capacity_from_sweep(sweep_result, slos, _ratio(max_error_rate, "--max-error-rate"))
        except (SweepFileError, ValueError) as exc:
            raise fail(str(exc).splitlines()[0]) from None
        capacity, in_flight = cap["requests_per_s"], cap.get("mean_in_flight")
        used_slo = [Threshold(expr=e) for e in cap["slo"]]
        source = f"sweep level {cap['level']:g} {sweep_result.unit}, {', '.join(cap['slo']) or 'errors only'}"
    assert capacity is not None
    inputs = FleetInputs(
        peak=forecast.rate, capacity=capacity, safety=safety, spares=spares, gpus_per_instance=gpus_per_instance,
        gpu_hour_cost=gpu_hour_cost, peak_cv=peak_cv,
    )  # fmt: skip
    if inputs.problems():
        raise fail("; ".join(inputs.problems()))
    result = plan_capacity(inputs, source, in_flight, sweep_result)
    console.print(f"forecast peak: [bold]{forecast.rate:.4g} req/s[/] ({forecast.source})", highlight=False)
    print_plan(result, console)
    if out is not None:
        from surgelab.plan.artefacts import write_artefacts

        try:
            write_artefacts(out, result, used_slo, deployment, namespace, hpa_metric, hpa_metric_name, min_replicas)
        except ValueError as exc:
            raise fail(str(exc)) from None
        console.print(f"wrote {out}/plan.json, hpa.yaml, alerts.yaml", highlight=False, soft_wrap=True)


def _queueing(
    name: str,
    rate: float | None,
    service_time: str | None,
    servers: int | None,
    target_wait: str | None,
    console: Console,
) -> None:
    from surgelab.plan.queueing import mmc, servers_for_wait
    from surgelab.plan.render import print_mmc

    if name.lower() != "mmc":
        raise fail(f"--model: only mmc (Erlang C) is known, got {name!r}")
    s = seconds_option(service_time, "--service-time")
    if rate is None or s is None:
        raise fail("--model mmc needs --rate and --service-time")
    if (servers is None) == (target_wait is None):
        raise fail("--model mmc needs exactly one of --servers or --target-wait")
    wait = seconds_option(target_wait, "--target-wait")
    try:
        result = servers_for_wait(rate, s, wait) if wait is not None else mmc(rate, s, servers or 0)
    except ValueError as exc:
        raise fail(str(exc)) from None
    print_mmc(result, console, wait)
