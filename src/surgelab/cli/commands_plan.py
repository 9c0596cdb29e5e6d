"""``surgelab little``, ``preview``, ``calibrate`` and ``plan``: arithmetic before a test, and capacity → fleet, HPA, alerts after one."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from surgelab.cli import app
from surgelab.cli.common import (
    EXIT_INVALID,
    fail,
    inputs_or_exit,
    load_or_exit,
    ratio_option,
    seconds_option,
    threshold_options,
    warn,
)


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
    from surgelab.report.preview import compute_preview, render_html, render_terminal

    scenario = load_or_exit(scenario_file, {})
    inputs_or_exit(scenario, scenario_file, warn)
    data = compute_preview(scenario, seconds_option(latency, "--latency") or 0.0)
    render_terminal(data, Console())
    from surgelab.load.ramp_check import ramp_warnings

    for warning in ramp_warnings(scenario):
        Console().print(f"[yellow]warning:[/] {warning}", highlight=False)
    if html is not None:
        from surgelab.files import os_error_line, write_atomic

        try:
            write_atomic(html, render_html(data))
        except OSError as exc:
            raise fail(f"preview page not written: {os_error_line(exc, 'or give --html another path', html)}") from None
        Console().print(f"wrote {html}")


@app.command("calibrate")
def calibrate(
    workers: int = typer.Option(1, min=1, max=64, help="Worker processes to calibrate for."),
    seconds: float = typer.Option(3.0, help="Duration of each level."),
    start: float = typer.Option(100.0, help="First rate tried (req/s)."),
    show: bool = typer.Option(False, "--show", help="Print the cached figure without measuring."),
) -> None:
    """Measure this machine's load-generation ceiling (streaming, zero-delay server) and cache it.

    A failing rate is tried 3 times; nothing is cached when the rates that failed ran on a machine
    busy with other processes (exit 3), since the figure would be their load, not the client's limit.
    """
    from surgelab.runner.headroom import cache_path, load_calibration, save_calibration
    from surgelab.sweep.calibrate import find_ceiling, loaded_failures
    from surgelab.testing.process import ScriptedServerProcess

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
        others = f", others {level.other_cores:.2f} of {level.cpus} cores" if level.other_cores is not None else ""
        console.print(
            f"  {mark} {level.rate:8.0f} req/s → {level.achieved:8.1f} achieved, lag p99 {level.lag_p99_ms:6.2f} ms{others}"
        )

    console.print(f"calibrating with {workers} worker(s) against a zero-delay streaming server on 127.0.0.1 …")
    with ScriptedServerProcess(lean=True) as server:  # the lean server: its cost per request is a fifth of the scripted one's
        pid = server.process.pid if server.process else None
        ceiling, levels = find_ceiling(server.base_url, workers, seconds, start, on_level=report, server_pid=pid)
    loaded = loaded_failures(levels)
    if loaded:
        rates = ", ".join(f"{r:.0f}" for r in dict.fromkeys(lv.rate for lv in loaded))
        busiest = max(loaded, key=lambda lv: lv.other_cores or 0.0)
        steal = f", {busiest.steal_cores:.2f} of them stolen by the hypervisor" if (busiest.steal_cores or 0) >= 0.01 else ""
        console.print(
            f"not cached: the rates that failed ({rates} req/s) ran while other processes used up to "
            f"{busiest.other_cores:.2f} of {busiest.cpus} cores{steal}, beside the client and the server — "
            f"{ceiling:.0f} req/s would be that load, not the client's ceiling; calibrate again when the machine is quiet"
        )
        raise typer.Exit(EXIT_INVALID)
    save_calibration(workers, ceiling, levels)
    console.print(f"client ceiling: [bold]{ceiling:.0f} req/s[/] with {workers} worker(s) (cached in {cache_path()})")


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
    safety: float | None = typer.Option(
        None, help="Fraction of the SLA capacity used at the peak (default 0.7 = 30% headroom)."
    ),
    cushion: float | None = typer.Option(
        None, help="Or: plan for this multiple of the peak (the seeds' 1.2 × is --safety 1/1.2, exactly)."
    ),
    spares: int = typer.Option(0, help="k of N+k: instances that may fail at the peak."),
    gpus_per_instance: int = typer.Option(1, help="GPUs per instance."),
    gpu_hour_cost: float | None = typer.Option(None, help="Cost per GPU-hour (any currency)."),
    currency: str = typer.Option("", help="The currency of --gpu-hour-cost, as the plan's page says it (e.g. USD)."),
    peak_cv: float = typer.Option(
        0.2, help="Coefficient of variation of the actual peak (lognormal) for the availability table."
    ),
    out: Path | None = typer.Option(None, help="Write plan.json, hpa.yaml, adapter.yaml and alerts.yaml here."),
    force: bool = typer.Option(False, "--force", help="Replace a plan already in --out (refused otherwise)."),
    deployment: str = typer.Option("inference", help="HPA: the Deployment to scale."),
    namespace: str | None = typer.Option(None, help="HPA: namespace."),
    hpa_metric: str = typer.Option(
        "inflight", help="HPA metric: inflight (requests running per pod), rps, queue (requests waiting) or gpu (DCGM utilisation)."
    ),
    hpa_target: float | None = typer.Option(
        None, help="HPA: average per pod (default: measured at the SLA level × safety; gpu: 80 percent)."
    ),
    scale_up_window: str = typer.Option("0s", help="HPA: scale-up stabilisation window."),
    scale_down_window: str = typer.Option("5m", help="HPA: scale-down stabilisation window (against flapping)."),
    hpa_metric_name: str | None = typer.Option(None, help="HPA: the pods metric name as your adapter exposes it."),
    min_replicas: int | None = typer.Option(None, help="HPA minReplicas (default 1 + spares)."),
    engine: str = typer.Option(
        "vllm", help="The fleet's server, whose metric names hpa.yaml, adapter.yaml and alerts.yaml use: "
        "vllm, sglang, tgi, triton or llamacpp.",
    ),
    queueing: str | None = typer.Option(
        None, "--queueing", help="mmc: an Erlang C queueing model from --rate and --service-time, no sweep."
    ),
    queue_model: str | None = typer.Option(None, "--model", hidden=True, help="Deprecated name of --queueing."),
    rate: float | None = typer.Option(None, help="--queueing mmc: arrival rate, req/s."),
    service_time: str | None = typer.Option(None, help="--queueing mmc: mean service time, e.g. 0.5s."),
    servers: int | None = typer.Option(None, help="--queueing mmc: number of servers."),
    target_wait: str | None = typer.Option(None, help="--queueing mmc: find the fewest servers with this mean wait."),
    search_space: Path | None = typer.Option(
        None, "--search", help="Search a deployment space (a YAML file, docs/capacity.md) for the cheapest fleet that meets its SLO."
    ),
    workers: int = typer.Option(2, "--workers", min=1, max=1024, help="--search: simulations run in this many processes."),
    ray: str | None = typer.Option(
        None, "--ray", help="--search: simulate on a Ray cluster (HOST:PORT, 'auto' or 'local'), a task per configuration."
    ),
) -> None:
    """Capacity plan: instances = ceil(peak ÷ (SLA capacity × safety)), N+k, cost, HPA, alerts; or Erlang C."""
    from surgelab.conditions import Threshold

    console = Console()
    if search_space is not None:
        from surgelab.cli.commands_search import run_search

        run_search(search_space, workers, out, force, console, ray)
        return
    if queue_model is not None:  # the old name read like an AI model; kept working, with a note
        Console(stderr=True).print("[yellow]note:[/] plan --model is now --queueing (a queueing model, not an AI model)")
        queueing = queueing or queue_model
    if queueing is not None:
        queue_model = queueing
        _queueing(queue_model, rate, service_time, servers, target_wait, console)
        return
    from surgelab.plan.capacity import capacity_from_sweep, plan_capacity, waiting_at
    from surgelab.plan.fleet import FleetInputs
    from surgelab.plan.forecast import PeakError, peak_from
    from surgelab.plan.k8s import HPA_METRICS
    from surgelab.plan.render import print_plan
    from surgelab.sweep import SweepFileError, read_sweep
    from surgelab.telemetry.promql import Promql
    from surgelab.telemetry.promql import engine as engine_preset

    if hpa_metric not in HPA_METRICS:
        raise fail(f"--hpa-metric: expected one of {', '.join(HPA_METRICS)}, got {hpa_metric!r}")
    try:
        server = Promql(engine_preset(engine))
    except ValueError as exc:
        raise fail(str(exc)) from None
    windows = (int(seconds_option(scale_up_window, "--scale-up-window") or 0),
               int(seconds_option(scale_down_window, "--scale-down-window") or 0))  # fmt: skip
    if peak is None:
        raise fail("--peak is required: the forecast peak in req/s, or a scenario or trace file")
    if (sweep_file is None) == (capacity is None):
        raise fail("give a sweep (SWEEP argument) or --capacity, not both or neither")
    try:
        forecast = peak_from(peak, seconds_option(peak_window, "--peak-window") or 0.0)
    except PeakError as exc:
        raise fail(str(exc)) from None
    used_slo = threshold_options(slo or [], "--slo")
    sweep_result, in_flight, waiting, source, cap, error_text = None, None, None, "given with --capacity", None, None
    if sweep_file is not None:
        try:
            sweep_result = read_sweep(sweep_file)
            slos = used_slo or None
            cap = capacity_from_sweep(sweep_result, slos, ratio_option(max_error_rate, "--max-error-rate"))
        except (SweepFileError, ValueError) as exc:
            raise fail(str(exc).splitlines()[0]) from None
        capacity, in_flight = cap["requests_per_s"], cap.get("mean_in_flight")
        waiting = waiting_at(sweep_result, cap["index"])
        used_slo = [Threshold(expr=e) for e in cap["slo"]]
        source = f"sweep level {cap['level']:g} {sweep_result.unit}, {', '.join(cap['slo']) or 'errors only'}"
        bar = (sweep_result.target or {}).get("model_error")
        if bar:  # a simulated sweep: the capacity is the engine model's, sized at its pessimistic end
            from surgelab.engine.accuracy import ErrorBar

            error = ErrorBar.from_dict(bar)
            simulated, capacity = capacity, error.pessimistic(capacity)
            source += f"; simulated {simulated:.4g} req/s ÷ (1 + {error.e2e:g} %), the engine model's slow end"
            error_text = error.describe()
            console.print(f"engine model: {error_text}", highlight=False, soft_wrap=True)
    assert capacity is not None
    defaults = {"safety": safety is None and cushion is None, "peak_cv": peak_cv == 0.2}
    if cushion is not None and safety is not None:
        raise fail("give --safety or --cushion, not both (a cushion of 1.2 is a safety of 1 ÷ 1.2)")
    if cushion is not None and not cushion >= 1:
        raise fail(f"--cushion: a multiple of the peak, >= 1 (1.2 plans for 1.2 × the peak), got {cushion:g}")
    safety = 1 / cushion if cushion is not None else (0.7 if safety is None else safety)
    inputs = FleetInputs(
        peak=forecast.rate, capacity=capacity, safety=safety, spares=spares, gpus_per_instance=gpus_per_instance,
        gpu_hour_cost=gpu_hour_cost, peak_cv=peak_cv,
    )  # fmt: skip
    if inputs.problems():
        raise fail("; ".join(inputs.problems()))
    result = plan_capacity(inputs, source, in_flight, sweep_result, waiting)
    console.print(f"forecast peak: [bold]{forecast.rate:.4g} req/s[/] ({forecast.source})", highlight=False)
    print_plan(result, console)
    from surgelab.report.plan_view import plan_context

    context = plan_context(sweep_result, sweep_file, cap, out or Path("."), result.to_dict()["fleet"]["inputs"], defaults, currency, error_text)
    for warning in context["warnings"]:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
    if out is not None:
        from surgelab.files import os_error_line, write_atomic
        from surgelab.plan.artefacts import write_artefacts
        from surgelab.report.plan_view import PLAN_FILE, render_plan_html

        try:
            paths = write_artefacts(
                out, result, used_slo, deployment, namespace, hpa_metric, hpa_metric_name, min_replicas, force,
                hpa_target, windows, engine=engine,
            )  # fmt: skip
            page = render_plan_html(result.to_dict(), {p.name: p.read_text() for p in paths[1:]}, sweep_result.name if sweep_result else "",
                                    context)  # fmt: skip
            write_atomic(out / PLAN_FILE, page)
        except ValueError as exc:
            raise fail(str(exc)) from None
        except OSError as exc:
            raise fail(f"plan not written: {os_error_line(exc, 'or give --out another directory', out)}") from None
        console.print(f"wrote {out}/plan.json, hpa.yaml, adapter.yaml, alerts.yaml, {PLAN_FILE}", highlight=False, soft_wrap=True)
        if any(t.metric == "ttft" for t in used_slo) and not server.has("ttft"):
            warn(f"note: {engine} exports no TTFT histogram: alerts.yaml has no rule on the TTFT SLO")


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
        raise fail(f"--queueing: only mmc (Erlang C) is known, got {name!r}")
    s = seconds_option(service_time, "--service-time")
    if rate is None or s is None:
        raise fail("--queueing mmc needs --rate and --service-time")
    if (servers is None) == (target_wait is None):
        raise fail("--queueing mmc needs exactly one of --servers or --target-wait")
    wait = seconds_option(target_wait, "--target-wait")
    try:
        result = servers_for_wait(rate, s, wait) if wait is not None else mmc(rate, s, servers or 0)
    except ValueError as exc:
        raise fail(str(exc)) from None
    print_mmc(result, console, wait)
