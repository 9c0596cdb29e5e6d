"""``surgelab run``, ``validate`` and ``schema``: scenarios in, run directories out."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import typer
import yaml
from rich.console import Console

from surgelab.analysis.verdict import run_exit_code
from surgelab.cli import app
from surgelab.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_THRESHOLDS,
    NETWORK_FLAGS,
    announce_end,
    api_key_of,
    ca_cert_option,
    client_cert_option,
    client_key_option,
    fail,
    inputs_or_exit,
    insecure_option,
    load_or_exit,
    proxy_option,
    server_name_option,
    start_dashboard,
    warn,
    warn_insecure,
)
from surgelab.cli.panels import apply_panels
from surgelab.scenario.model import Scenario, slug
from surgelab.yamlfile import DuplicateKeyError, load_yaml


def _overrides(**flags: Any) -> dict[str, tuple[str, Any]]:
    """Map given CLI flags onto scenario fields; switching loop mode clears the other one."""
    paths = {
        "name": "name", "seed": "seed", "url": "target.url", "model": "target.model",
        "endpoint": "target.endpoint", "stream": "target.stream", "api_key_env": "target.api_key_env",
        "connection": "target.connection", "rate": "load.rate", "arrival": "load.arrival",
        "cv": "load.cv", "concurrency": "load.concurrency", "think_time": "load.think_time", "ramp_up": "load.ramp_up",
        "duration": "load.duration", "warmup": "load.warmup", "max_in_flight": "load.max_in_flight",
        "grace": "load.grace", "prompt_tokens": "workload.prompt_tokens",
        "max_tokens": "workload.output_tokens", "out": "output.dir", "preflight": "preflight",
        **NETWORK_FLAGS, "follow_redirects": "target.redirects",
    }  # fmt: skip
    result: dict[str, tuple[str, Any]] = {}
    for key, value in flags.items():
        if value is None:
            continue
        result[paths[key]] = ("--" + key.replace("_", "-"), str(value) if isinstance(value, Path) else value)
    if flags.get("rate") is not None:
        result["load.concurrency"] = ("--rate", None)
        result.setdefault("load.ramp_up", ("--rate", 0.0))  # a file's closed-loop ramp does not apply to an open loop
    if flags.get("concurrency") is not None:
        result["load.rate"] = ("--concurrency", None)
    return result


def _set_overrides(items: list[str]) -> dict[str, tuple[str, Any]]:
    """``--set a.b=value``: the value is read as YAML, so numbers, lists and mappings work."""
    result: dict[str, tuple[str, Any]] = {}
    for item in items:
        path, sep, raw = item.partition("=")
        if not sep or not path.strip():
            raise fail(f"--set {item!r}: expected path=value, e.g. --set load.warmup=10s")
        try:
            value = load_yaml(raw) if raw.strip() else ""
        except DuplicateKeyError as exc:
            raise fail(f"--set {path.strip()}: {exc.key} is given twice; keep one") from None
        except yaml.YAMLError:
            value = raw
        result[path.strip()] = (f"--set {path.strip()}", value)
    return result


@app.command("run")
def run(
    scenario_file: Path | None = typer.Argument(
        None, metavar="[SCENARIO]", help="Scenario YAML; flags override its fields."
    ),
    url: str | None = typer.Option(None, help="OpenAI-compatible base URL, e.g. http://host:8000/v1."),
    model: str | None = typer.Option(None, help="Model (default: the only one the target lists)."),
    endpoint: str | None = typer.Option(None, help="chat or completions."),
    rate: float | None = typer.Option(None, help="Open loop: requests per second."),
    concurrency: int | None = typer.Option(None, help="Closed loop: number of virtual users."),
    arrival: str | None = typer.Option(None, help="Open loop arrivals: constant (evenly spaced), poisson, gamma, or uniform (a fixed count at uniform times: inference-perf's constant)."),
    cv: float | None = typer.Option(None, help="Gamma arrivals: coefficient of variation."),
    think_time: str | None = typer.Option(None, help="Closed loop: think time between requests, e.g. 2s."),
    ramp_up: str | None = typer.Option(
        None, help="Closed loop: users start evenly spread over this time, e.g. 10s (default: all at once)."
    ),
    duration: str | None = typer.Option(None, help="How long to send, e.g. 30s or 5m."),
    warmup: str | None = typer.Option(None, help="Initial period excluded from the summary."),
    prompt_tokens: int | None = typer.Option(None, help="Prompt length in tokens."),
    max_tokens: int | None = typer.Option(None, help="Output length (max_tokens) in tokens."),
    max_in_flight: int | None = typer.Option(None, help="Open loop: drop requests beyond this many in flight."),
    grace: str | None = typer.Option(
        None,
        help="After the planned end, time for in-flight requests before they are cancelled (default 10s).",
    ),
    preflight: bool | None = typer.Option(
        None,
        "--preflight/--no-preflight",
        help="Check the target first: /models and one request; exit 4 with its message (default: on).",
    ),
    stream: bool | None = typer.Option(None, "--stream/--no-stream", help="Stream responses (SSE)."),
    connection: str | None = typer.Option(None, help="keepalive (pooled) or close."),
    api_key_env: str | None = typer.Option(None, help="Environment variable holding the API key."),
    ca_cert: Path | None = ca_cert_option(),
    client_cert: Path | None = client_cert_option(),
    client_key: Path | None = client_key_option(),
    server_name: str | None = server_name_option(),
    insecure: bool | None = insecure_option(),
    proxy: str | None = proxy_option(),
    follow_redirects: int | None = typer.Option(
        None, min=0, max=10, help="Follow up to N redirects (default 0)."
    ),
    threshold: list[str] | None = typer.Option(None, help="Pass/fail criterion, e.g. 'p99(ttft) < 2s' (repeatable)."),
    seed: int | None = typer.Option(None, help="Seed for the schedule and the workload."),
    name: str | None = typer.Option(None, help="Run name (used in the default run directory)."),
    out: Path | None = typer.Option(None, help="Run directory to write (created; must not hold another run)."),
    set_: list[str] | None = typer.Option(
        None, "--set", help="Any scenario field, path=value (repeatable)."
    ),
    scrape: list[str] | None = typer.Option(
        None, help="/metrics URL to scrape during the run (repeatable)."
    ),
    prometheus_port: int | None = typer.Option(None, help="Serve surgelab's own live metrics on this port."),
    prometheus_host: str = typer.Option(
        "127.0.0.1", help="Address for --prometheus-port (loopback)."
    ),
    prometheus_token_env: str | None = typer.Option(
        None, help="Variable holding the token scrapes must send."
    ),
    workers: int = typer.Option(
        1, min=1, max=256, help="Worker processes (one per core is usual)."
    ),
    ray: str | None = typer.Option(
        None, help="Ray: HOST:PORT, 'auto' or 'local'."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No live view and no summary table."),
    dashboard: bool = typer.Option(False, "--dashboard", help="Live web dashboard on 127.0.0.1."),
    dashboard_port: int = typer.Option(0, help="Dashboard port (0: any free port)."),
    dashboard_token: str | None = typer.Option(None, help="Dashboard token (?token=… in the URL)."),
    unlimited: bool = typer.Option(
        False,
        "--i-know-what-i-am-doing",
        help="Lift the caps on rate, users and duration (guards; docs/reliability.md).",
    ),
) -> None:
    """Run load against a target and record every request.

    Exit codes: 0 pass · 1 a threshold failed, a guard stopped the run, or over 10% did not succeed — failed, timed out, unanswered, dropped or lost (the default bound, unless a threshold on error_rate is set) · 2 bad input · 3 invalid run (client fell behind, drops, a worker died) · 4 pre-flight failed · 130 interrupted.
    """
    overrides = _overrides(
        url=url, model=model, endpoint=endpoint, rate=rate, concurrency=concurrency, arrival=arrival,
        cv=cv, think_time=think_time, ramp_up=ramp_up, duration=duration, warmup=warmup, prompt_tokens=prompt_tokens,
        max_tokens=max_tokens, max_in_flight=max_in_flight, grace=grace, stream=stream,
        connection=connection, api_key_env=api_key_env, seed=seed, name=name, out=out, preflight=preflight, ca_cert=ca_cert,
        client_cert=client_cert, client_key=client_key, server_name=server_name, insecure=insecure, proxy=proxy,
        follow_redirects=follow_redirects,
    )  # fmt: skip
    if threshold:
        overrides["thresholds"] = ("--threshold", list(threshold))
    if scrape:
        overrides["telemetry.sources"] = ("--scrape", [{"url": url} for url in scrape])
    overrides.update(_set_overrides(set_ or []))
    if unlimited:
        overrides["guards.unlimited"] = ("--i-know-what-i-am-doing", True)
    scenario = load_or_exit(scenario_file, overrides)
    inputs_or_exit(scenario, scenario_file, warn)
    observers = []
    if prometheus_port is not None:
        observers.append(_exporter(scenario.name, prometheus_port, prometheus_host, prometheus_token_env))
    board = start_dashboard(scenario, dashboard_port, dashboard_token) if dashboard else None
    try:
        raise typer.Exit(
            execute(
                scenario,
                console=Console(stderr=False),
                quiet=quiet,
                observers=[*observers, board] if board else observers,
                workers=workers,
                ray=ray,
            )  # fmt: skip
        )
    finally:
        if board is not None:
            board.stop()


apply_panels(run)  # each option's help panel, set before the CLI is built


def _exporter(name: str, port: int, host: str, token_env: str | None = None) -> Any:
    from surgelab.exposure import exposure_error, token_from_env
    from surgelab.telemetry.exporter import Exporter

    token = token_from_env(token_env)
    if token_env and not token:
        raise fail(f"--prometheus-token-env {token_env}: the variable is not set")
    refusal = exposure_error(host, token, "the Prometheus exporter", "--prometheus-token-env NAME")
    if refusal:
        raise fail(refusal)
    exporter = Exporter(name)
    try:
        exporter.serve(port, host, token)
    except OSError as exc:
        raise fail(f"--prometheus-port {port}: cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    Console(stderr=True).print(f"surgelab metrics on http://{host}:{port}/metrics", highlight=False)
    return exporter


def execute(
    scenario: Scenario,
    console: Console,
    quiet: bool = False,
    run_dir: Path | None = None,
    observers: Sequence[Any] = (),
    workers: int = 1,
    ray: str | None = None,
) -> int:
    """Run a validated scenario with the terminal view; return the exit code."""
    from surgelab.aio import run_async
    from surgelab.metrics.rundir import RunDirError, records_not_written
    from surgelab.report.terminal import LiveView, print_summary
    from surgelab.runner.backends import backend_for
    from surgelab.runner.compare import CompareRun
    from surgelab.runner.preflight import EXIT_PREFLIGHT, PreflightFailed

    api_key = api_key_of(scenario.target)
    if scenario.target.api_key_env and not api_key:
        console.print(f"[yellow]warning:[/] ${scenario.target.api_key_env} is not set; sending without an API key")
    warn_insecure(console, scenario.targets if scenario.targets else [scenario.target])
    if run_dir is None:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        run_dir = Path(scenario.output.dir or f"runs/{scenario.name}-{stamp}")
    view = LiveView(console) if not quiet else None
    backend = backend_for(scenario, workers=workers, ray=ray, handle_signals=True)
    on_tick = view.update if view is not None else None
    try:
        if view is not None:
            with view:
                result = run_async(backend.run(scenario, run_dir, api_key=api_key, on_tick=on_tick, observers=observers))
        else:
            result = run_async(backend.run(scenario, run_dir, api_key=api_key, on_tick=on_tick, observers=observers))
    except RunDirError as exc:
        raise fail(str(exc)) from None
    except PreflightFailed as exc:
        raise fail(f"pre-flight: {exc} (--no-preflight skips this check)", EXIT_PREFLIGHT) from None
    except RuntimeError as exc:  # a worker layout that cannot start (Ray missing, a worker that died at start)
        raise fail(str(exc)) from None
    except OSError as exc:  # records, summary or run.json could not be written (a full disk): what is on disk stays
        raise fail(records_not_written(exc, run_dir), EXIT_THRESHOLDS) from None
    if isinstance(result, CompareRun):
        return _compared(result, console, run_dir)
    from surgelab.report.outputs import finalize_run

    announce_end(observers, result.summary, finalize_run(result.run_dir, console))
    if not quiet:
        print_summary(result.summary, console)
    console.print(f"run directory: {result.run_dir}", highlight=False, soft_wrap=True)
    _say_failed_defaults(result.summary, result.stop_reason)
    return run_exit_code(result.thresholds_passed, result.stop_reason, result.summary["validity"]["valid"])


def _say_failed_defaults(summary: dict[str, Any], stop_reason: str) -> None:
    """A failed default bound is said on stderr even with --quiet: it is why the exit code is 1."""
    err = Console(stderr=True)
    for t in summary.get("thresholds", []):
        if not t.get("default") or t["passed"]:
            continue
        if t["metric"] == "error_rate":
            err.print(f"failed: error rate {t['observed']:.1%} is over the default bound ({t['expr']}){_cause(summary)}; "
                      "a threshold of your own replaces it, e.g. --threshold 'error_rate < 50%'", highlight=False, soft_wrap=True)  # fmt: skip
        else:
            err.print("failed: no request succeeded", highlight=False, soft_wrap=True)
    if stop_reason.startswith("aborted: guard"):
        err.print(f"failed: {stop_reason}", highlight=False, markup=False, soft_wrap=True)


def _cause(summary: dict[str, Any]) -> str:
    """What most of the failures were, for the default bound's line: requests never answered, else the largest group."""
    req, top = summary["requests"], (summary.get("errors") or [None])[0]
    if req.get("unanswered"):
        return f": {req['unanswered']} of {req['measured']} requests never answered"
    return f": mostly {top['count']:,} × {top['state']}: {top['message'] or 'no message'}" if top else ""


def _compared(done: Any, console: Console, run_dir: Path) -> int:
    """Compare mode, after one run per target: the side-by-side comparison."""
    from surgelab.report.compare import compare_runs
    from surgelab.report.outputs import HtmlOutput, JsonOutput, TerminalOutput

    dirs = [run_dir / name for name in done.results]
    if len(dirs) > 1:
        data = compare_runs(dirs)
        TerminalOutput(console).finalize(data)
        JsonOutput(run_dir / "compare.json").finalize(data)
        HtmlOutput(run_dir / "compare.html").finalize(data)
    index = json.loads((run_dir / "compare-index.json").read_text())
    for name, agree in index.get("agreement", {}).items():
        console.print(
            f"answers of {name} vs {index['targets'][0]}: {agree['exact']:.1%} identical, "
            f"{agree['normalised']:.1%} after normalising ({agree['compared']} requests)"
        )
    console.print(f"run directories: {run_dir}/<target>/ · comparison: {run_dir / 'compare.html'}", highlight=False)
    if not all(r.thresholds_passed for r in done.results.values()):
        return EXIT_THRESHOLDS
    return EXIT_INTERRUPTED if done.stop_reason.startswith("interrupted") or "stopped" in done.stop_reason else EXIT_OK


@app.command("validate")
def validate(scenario_file: Path = typer.Argument(..., metavar="SCENARIO")) -> None:
    """Check a scenario file; print every problem with its line number."""
    scenario = load_or_exit(scenario_file, {})
    inputs_or_exit(scenario, scenario_file, print)
    phases = "; ".join(
        f"{p.name}: {p.load.mode} loop, {p.load.describe()} for {p.load.planned_duration:g}s"
        for p in scenario.phase_list
    )
    from surgelab.cli.resolved import resolved_lines
    from surgelab.load.ramp_check import ramp_warnings
    from surgelab.redact import redact_url
    from surgelab.workload.context import context_warnings

    print(f"{scenario_file}: ok — {scenario.name} against {redact_url(scenario.target.base_url)} — {phases}")
    for line in resolved_lines(scenario):  # every target's timeouts and the health checks, as they resolved
        print(line)
    for warning in ramp_warnings(scenario) + context_warnings(scenario):
        print(f"warning: {warning}")


@app.command("schema")
def schema(
    markdown: bool = typer.Option(False, "--markdown", help="Print the Markdown scenario reference instead."),
) -> None:
    """Print the scenario JSON Schema (for editor completion and validation)."""
    if markdown:
        from surgelab.scenario.reference import markdown as reference

        sys.stdout.write(reference())
        return
    json.dump(Scenario.model_json_schema(by_alias=True), sys.stdout, indent=2)
    sys.stdout.write("\n")


@app.command("summarize")
def summarize_command(
    run_dir: Path = typer.Argument(..., metavar="RUN", help="A run directory, finished or not."),
) -> None:
    """Rebuild summary.json (and the report) from a run directory's records — after a crash too."""
    from surgelab.metrics.rundir import read_run
    from surgelab.report.terminal import print_summary
    from surgelab.runner.run import write_summary

    try:
        data, info = read_run(run_dir)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise fail(f"{run_dir} is not a run directory: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("name"), str):
        data["name"] = slug(data["name"])  # a run saved before names had to be slugs ('my test') still summarizes
    try:
        scenario = Scenario.model_validate(data, context={"base_dir": run_dir})
    except ValueError as exc:
        raise fail(f"{run_dir / 'scenario.yaml'}: {str(exc).splitlines()[0]}") from None
    summary = write_summary(scenario, run_dir, info)
    from surgelab.report.outputs import finalize_run

    finalize_run(run_dir, Console(stderr=True))  # a report problem is a warning; the summary stands
    print_summary(summary, Console())
    Console().print(f"wrote {run_dir / 'summary.json'}")
