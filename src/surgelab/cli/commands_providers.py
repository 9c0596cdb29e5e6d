"""``surgelab probe``, ``score``, ``monitor``, ``history`` and ``cost``: choosing a provider."""

from __future__ import annotations

import json
import ssl
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError
from rich.console import Console

from surgelab.cli import app
from surgelab.cli.common import (
    api_key_of,
    ca_cert_option,
    client_cert_option,
    client_key_option,
    fail,
    insecure_option,
    load_or_exit,
    proxy_option,
    server_name_option,
    warn_insecure,
    with_network_flags,
)
from surgelab.redact import redact_url
from surgelab.scenario.target import Target
from surgelab.units import parse_duration


def _seconds(value: str, flag: str) -> float:
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise fail(f"{flag}: {exc}") from None


def _peak(value: str) -> tuple[int, int]:
    from surgelab.providers.requirements import parse_hours

    try:
        return parse_hours(value)
    except ValueError as exc:
        raise fail(f"--peak: {exc}") from None


def _prices(scenario_file: Path | None) -> dict[str, Any]:
    if scenario_file is None:
        return {}
    scenario = load_or_exit(scenario_file, {})
    return {t.name: t.price for t in scenario.targets or []}


def _write_json(path: Path, data: Any) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    except OSError as exc:
        raise fail(f"{path}: cannot write: {exc.strerror or exc}") from None


def _endpoints(
    url: str | None,
    model: str | None,
    api_key_env: str | None,
    name: str | None,
    scenario_file: Path | None,
    target: str | None,
) -> list[tuple[str, Target]]:
    """(name, target) of each endpoint to probe, from flags or a scenario."""
    from urllib.parse import urlsplit

    if scenario_file is not None:
        if url is not None:
            raise fail("give --url/--model or --scenario, not both")
        scenario = load_or_exit(scenario_file, {})
        found: list[tuple[str, Target]] = [(t.name, t) for t in scenario.targets or []] or [
            (scenario.name, scenario.target)
        ]
        if target is not None:
            found = [f for f in found if f[0] == target]
            if not found:
                raise fail(f"--target {target}: not a target of {scenario_file}")
        return found
    if url is None or model is None:
        raise fail("give --url and --model, or --scenario (every target of a scenario)")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise fail(f"--url: expected an http(s) URL such as http://127.0.0.1:8000/v1, got {url!r}")
    try:
        return [(name or parts.netloc, Target(url=url, model=model, api_key_env=api_key_env))]
    except ValidationError as exc:
        raise fail(f"--url: {exc.errors()[0]['msg']}") from None


def _usable_tls(target: Target) -> None:
    """A certificate or key file that exists but is not PEM (or a key that does not fit): one line, not a traceback."""
    from surgelab.client.network import ssl_context

    if target.base_url.startswith("https:"):
        try:
            ssl_context(target.tls)
        except (ssl.SSLError, OSError) as exc:
            files = ", ".join(f for f in (target.tls.ca_cert, target.tls.client_cert, target.tls.client_key) if f)
            raise fail(f"TLS files ({files}): cannot be loaded: {exc}") from None


@app.command("probe")
def probe(
    url: str | None = typer.Option(None, help="OpenAI base URL, e.g. http://127.0.0.1:8000/v1"),
    model: str | None = typer.Option(None, help="Model name."),
    api_key_env: str | None = typer.Option(None, help="NAME of the variable holding the API key."),
    name: str | None = typer.Option(None, help="Target name in the result (default host:port)."),
    scenario: Path | None = typer.Option(None, help="Probe the targets of this scenario instead of --url/--model."),
    target: str | None = typer.Option(None, help="With --scenario: only this target."),
    out: Path | None = typer.Option(
        None, help="Result JSON (input of surgelab score); with several targets a directory of probe-NAME.json."
    ),
    only: str | None = typer.Option(
        None, help="Comma-separated probes: cold_start, conformance, models, output_control, context, retention."
    ),
    idle: str = typer.Option("0s", help="Cold start: wait this long before the first request."),
    timeout: str = typer.Option("60s", help="Bound on each request."),
    context_limit: int = typer.Option(262_144, min=1024, help="Context: never try a longer prompt (tokens)."),
    context_budget: str = typer.Option("180s", help="Context: time budget of the whole search."),
    context_precision: float = typer.Option(
        0.001, min=0.0, max=0.5, help="Context: stop when the bracket is this narrow (0: to the token)."
    ),
    turns: int = typer.Option(24, min=2, max=200, help="Retention: the longest conversation tried."),
    ca_cert: Path | None = ca_cert_option(),
    client_cert: Path | None = client_cert_option(),
    client_key: Path | None = client_key_option(),
    server_name: str | None = server_name_option(),
    insecure: bool | None = insecure_option(),
    proxy: str | None = proxy_option(),
) -> None:
    """Probe what a load test cannot show: API conformance, context length, multi-turn memory, cold start.

    The TLS and proxy flags are those of surgelab run (over each target's tls and proxy with --scenario).
    """
    from surgelab.aio import run_async
    from surgelab.providers.probe_http import Endpoint
    from surgelab.providers.probes import PROBES, ProbeSettings, Unreachable, run_probes
    from surgelab.providers.render import print_probe

    network = {"ca_cert": ca_cert, "client_cert": client_cert, "client_key": client_key,
               "server_name": server_name, "insecure": insecure, "proxy": proxy}  # fmt: skip
    endpoints = [(n, with_network_flags(t, **network)) for n, t in
                  _endpoints(url, model, api_key_env, name, scenario, target)]
    for _, found in endpoints:
        _usable_tls(found)
    chosen = tuple(p.strip() for p in only.split(",") if p.strip()) if only else ()
    unknown = [p for p in chosen if p not in PROBES]
    if unknown:
        raise fail(f"--only: unknown probe(s) {', '.join(unknown)} (known: {', '.join(PROBES)})")
    keys = {}
    for _, found in endpoints:
        variable = found.api_key_env
        if variable:
            keys[variable] = api_key_of(found)
            if keys[variable] is None:
                raise fail(f"api key: the variable {variable} is not set")
    checkpoints = tuple(sorted({c for c in (2, 5, 10, 15, 20, turns) if c <= turns}))
    settings = ProbeSettings(
        idle=_seconds(idle, "--idle"), context_limit=context_limit, context_budget=_seconds(context_budget, "--context-budget"),
        context_precision=context_precision, turns=turns, checkpoints=checkpoints, only=chosen,
    )  # fmt: skip
    seconds = _seconds(timeout, "--timeout")
    console = Console()
    warn_insecure(console, [t for _, t in endpoints])
    for target_name, found in endpoints:
        console.print(f"probing {target_name}: {redact_url(found.base_url)} ({found.model}) …", highlight=False)
        variable = found.api_key_env
        endpoint = Endpoint(found.base_url, found.model, keys.get(variable) if variable else None, seconds,
                            found.tls, found.proxy)  # fmt: skip
        try:
            doc = run_async(run_probes(endpoint, target_name, settings, on_result=lambda r: print_probe(r, console)))
        except Unreachable as exc:
            raise fail(str(exc)) from None
        if out is not None:
            path = out / f"probe-{target_name}.json" if len(endpoints) > 1 else out
            _write_json(path, doc)
            console.print(f"wrote {path}", highlight=False)


@app.command("score")
def score_command(
    inputs: list[str] = typer.Argument(
        ..., metavar="RUNS...", help="Run dirs, compare dirs, probe .json, history .sqlite; NAME=PATH names a target."
    ),
    requirements: Path = typer.Option(..., help="Requirement profile (YAML)."),
    history: Path | None = typer.Option(None, help="Monitoring history (surgelab monitor --db)."),
    scenario: Path | None = typer.Option(None, help="Scenario whose targets[].price gives cost_per_mtok."),
    tz: str | None = typer.Option(None, help="History: the users' time zone for the peak hours (default: the profile's peak.tz)."),
    peak: str | None = typer.Option(None, help="History: peak hours, start-end (default: the profile's peak.hours, else 9-11)."),
    out: Path | None = typer.Option(None, help="Write the matrix and ranking as JSON."),
) -> None:
    """Pass/fail matrix and weighted ranking of targets against a requirement profile; each failure explained."""
    from surgelab.providers.evidence import EvidenceError, collect
    from surgelab.providers.history import HistoryError
    from surgelab.providers.render import print_scorecard
    from surgelab.providers.requirements import RequirementError, load_requirements
    from surgelab.providers.score import score

    try:
        profile = load_requirements(requirements)
        zone = tz or (profile.peak.tz if profile.peak else None)
        hours = _peak(peak) if peak else (profile.peak.span if profile.peak else (9, 11))
        needs_zone = any(r.metric == "peak_p90" for r in profile.requirements())
        evidence = collect(inputs, history, {"tz": zone, "peak": hours}, zone_required=needs_zone)
    except (RequirementError, EvidenceError, HistoryError) as exc:
        raise fail(str(exc)) from None
    if not evidence:
        raise fail("no targets found in the inputs")
    card = score(profile, evidence, _prices(scenario))
    print_scorecard(card, Console())
    if out is not None:
        _write_json(out, card.to_dict())
    if not any(r.qualified for r in card.ranking):
        raise typer.Exit(1)


@app.command("monitor")
def monitor_command(
    scenario_file: Path = typer.Argument(
        ..., metavar="SCENARIO", help="A small probe scenario; with targets: each is probed."
    ),
    every: str = typer.Option("1h", help="Time between rounds."),
    jitter: str = typer.Option("5m", help="Random extra delay of each round, in [0, jitter)."),
    once: bool = typer.Option(False, "--once", help="One round, then exit (for cron)."),
    rounds: int | None = typer.Option(None, min=1, help="Stop after this many rounds."),
    db: Path = typer.Option(Path("history.sqlite"), help="SQLite history to append to."),
    keep_runs: Path | None = typer.Option(None, help="Keep every round's run directory under here."),
    metrics_port: int | None = typer.Option(
        None, min=1, max=65535, help="Serve the latest values for Prometheus on 127.0.0.1:PORT."
    ),
    metrics_file: Path | None = typer.Option(None, help="Write the latest values in node_exporter textfile format."),
) -> None:
    """Probe each target on a schedule and append the results to a history database."""
    import asyncio
    import signal

    from surgelab.aio import run_async
    from surgelab.providers.history import History, HistoryError
    from surgelab.providers.monitor import Gauges, MonitorSettings, monitor

    scenario = load_or_exit(scenario_file, {})
    settings = MonitorSettings(every=_seconds(every, "--every"), jitter=_seconds(jitter, "--jitter"),
                               rounds=1 if once else rounds, keep_runs=keep_runs)  # fmt: skip
    if settings.every <= 0:
        raise fail("--every: must be > 0")
    gauges = Gauges()
    if metrics_port is not None:
        from prometheus_client import start_http_server

        try:
            start_http_server(metrics_port, addr="127.0.0.1", registry=gauges.registry)
        except OSError as exc:
            raise fail(f"--metrics-port {metrics_port}: {exc.strerror or exc}") from None
    console = Console()

    def report(number: int, samples: list[Any]) -> None:
        for s in samples:
            p90 = "–" if s.e2e_p90_ms is None else f"{s.e2e_p90_ms:,.0f} ms"
            console.print(f"round {number} · {s.target}: {s.ok}/{s.requests} ok, P90 {p90}, errors {s.error_rate:.2%}"
                          + (f" ({s.note})" if s.note else ""), highlight=False)  # fmt: skip
        if metrics_file is not None:
            gauges.write(metrics_file)

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        with History(db) as history:
            return await monitor(scenario, history, settings, gauges=gauges, on_round=report, stop=stop)

    try:
        done = run_async(main())
    except HistoryError as exc:
        raise fail(str(exc)) from None
    console.print(f"{done} round(s) appended to {db}", highlight=False)


@app.command("history")
def history_command(
    db: Path = typer.Option(Path("history.sqlite"), help="SQLite history written by surgelab monitor."),
    tz: str | None = typer.Option(None, help="Time zone for hours of the day (default: this machine's)."),
    peak: str = typer.Option("9-11", help="Peak hours to highlight, start-end."),
    days: float = typer.Option(7.0, min=1.0, help="Window length in days (the previous window is the baseline)."),
    out: Path | None = typer.Option(None, help="Write the report as JSON."),
) -> None:
    """Per target: P90 by hour of day, 7-day throughput volatility, error rates, regressions vs the previous week."""
    from dataclasses import asdict

    from surgelab.providers.history import History, HistoryError
    from surgelab.providers.render import print_history
    from surgelab.providers.trends import analyse

    try:
        with History(db, create=False) as history:
            report = analyse(history, tz=tz, peak=_peak(peak), days=days)
    except HistoryError as exc:
        raise fail(str(exc)) from None
    print_history(report, Console())
    if out is not None:
        _write_json(out, asdict(report))


@app.command("cost")
def cost_command(
    inputs: list[str] = typer.Argument(..., metavar="RUNS...", help="Run or compare dirs; NAME=PATH names a target."),
    scenario: Path = typer.Option(..., help="Scenario whose targets[].price are the prices."),
    plan: Path | None = typer.Option(None, help="plan.json (or its directory) of surgelab plan: the per-hour fleet."),
    fleet: str | None = typer.Option(None, help="With --plan: the target whose per_hour price is one instance's."),
    out: Path | None = typer.Option(None, help="Write the figures as JSON."),
) -> None:
    """Cost per million tokens at the measured throughput, and the break-even volume against a per-hour fleet."""
    from surgelab.providers.cost import break_even, cost_per_mtok, read_plan
    from surgelab.providers.evidence import EvidenceError, collect
    from surgelab.providers.render import print_break_even, print_costs

    prices = _prices(scenario)
    try:
        evidence = collect(inputs)
    except EvidenceError as exc:
        raise fail(str(exc)) from None
    missing = [n for n, ev in evidence.items() if ev.summaries and n not in prices]
    if missing:
        raise fail(f"{scenario}: no target named {', '.join(missing)} (targets: {', '.join(prices) or 'none'})")
    costs = [cost_per_mtok(n, prices[n], block) for n, ev in evidence.items() for _, block in ev.summaries[-1:]]
    console = Console()
    print_costs(costs, console)
    doc: dict[str, Any] = {"costs": [c.to_dict() for c in costs], "break_even": {}}
    if plan is not None:
        try:
            fleet_plan = read_plan(plan)
        except ValueError as exc:
            raise fail(str(exc)) from None
        price = prices.get(fleet) if fleet else None
        if fleet is not None and (price is None or price.per_hour is None):
            raise fail(f"--fleet {fleet}: needs a target with price.per_hour in {scenario}")
        per_hour = (
            price.per_hour * fleet_plan["instances"]
            if price and price.per_hour is not None
            else fleet_plan["cost_per_hour"]
        )
        if per_hour is None:
            raise fail(
                "--plan: the plan has no cost (plan --gpu-hour-cost) and no --fleet target with price.per_hour was given"
            )
        fleet_cost = next((c for c in costs if c.target == fleet), None)
        for c in costs:
            p = prices.get(c.target)
            if c.target == fleet or c.per_mtok is None or p is None or p.per_hour is not None:
                continue
            per_request = fleet_cost.tokens_per_request if fleet_cost else c.tokens_per_request
            result = break_even(c.per_mtok, per_hour, fleet_plan["instances"], per_request, fleet_plan["capacity_rps"])
            print_break_even(c.target, fleet or str(plan), result, console)
            doc["break_even"][c.target] = result.to_dict()
    if out is not None:
        _write_json(out, doc)
