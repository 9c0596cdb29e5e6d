"""``surgelab grafana`` and ``surgelab alerts``: surgelab's view, for the tools operators watch."""

from __future__ import annotations

import json
from pathlib import Path

import typer
import yaml

from surgelab.cli import app
from surgelab.cli.common import fail, warn
from surgelab.units import parse_duration, parse_ratio


def _write(text: str, out: Path | None) -> None:
    if out is None:
        typer.echo(text)
        return
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise fail(f"cannot write {out}: {exc.strerror or exc}") from None
    typer.echo(f"wrote {out}", err=True)


@app.command("grafana")
def grafana(
    out: Path | None = typer.Option(None, help="Write the dashboard JSON here (default: print it)."),
    title: str = typer.Option("surgelab", help="Dashboard title."),
) -> None:
    """A Grafana dashboard for `surgelab run --prometheus-port` (import it into Grafana)."""
    from surgelab.telemetry.grafana import dashboard

    _write(json.dumps(dashboard(title), indent=2), out)


@app.command("alerts")
def alerts(
    ttft_p99: str = typer.Option("2s", help="Alert when P99 TTFT stays above this."),
    e2e_p99: str | None = typer.Option(None, help="Alert when P99 end-to-end latency stays above this."),
    error_rate: str = typer.Option("1%", help="Alert when the error rate stays above this."),
    knee_rps: float | None = typer.Option(None, help="Throughput at the knee (req/s), from a sweep."),
    near_knee: float = typer.Option(0.8, help="Alert when throughput passes this share of the knee."),
    for_minutes: int = typer.Option(5, help="How long a condition must hold."),
    vllm: bool = typer.Option(False, "--vllm", help="Also rules on a vLLM-compatible server's own metrics (--engine vllm)."),
    engine: str | None = typer.Option(
        None, help="Also rules on this server's own metrics: vllm, sglang, tgi, triton or llamacpp (--source server reads it; default vllm).",
    ),
    rule: list[str] | None = typer.Option(
        None, "--rule", help="A rule as said: 'p90(e2e) > 1.5s for 5m', 'error_rate > 1% for 5m', 'queue > 10 for 2m', "
        "'gpu_util > 90% for 15m' (repeatable).",
    ),
    source: str = typer.Option("client", help="--rule latencies and errors from: client (surgelab's exporter) or server (--engine's)."),
    window: str = typer.Option("5m", help="--rule: the rate window of latencies and errors."),
    out: Path | None = typer.Option(None, help="Write the rules YAML here (default: print it)."),
) -> None:
    """Prometheus alert rules: P99 above the SLO, error rate, a client falling behind, traffic near the knee."""
    from surgelab.telemetry.alert_expr import alert_rule, parse_alert
    from surgelab.telemetry.alerts import missing, slo_alert_rules
    from surgelab.telemetry.promql import engine as engine_preset

    if source not in ("client", "server"):
        raise fail(f"--source: expected client or server, got {source!r}")
    if vllm and engine not in (None, "vllm"):
        raise fail(f"--vllm is --engine vllm: give one engine, not --vllm and --engine {engine}")
    try:
        server = engine_preset(engine or "vllm")
        rules = slo_alert_rules(
            ttft_p99_s=parse_duration(ttft_p99),
            e2e_p99_s=parse_duration(e2e_p99) if e2e_p99 else None,
            error_rate=parse_ratio(error_rate),
            knee_rps=knee_rps,
            near_knee=near_knee,
            for_minutes=for_minutes,
            server=server if vllm or engine else None,
        )
        parse_duration(window)
        said = [alert_rule(parse_alert(r), source, window, engine=server) for r in rule or []]  # type: ignore[arg-type]
        rules["groups"][0]["rules"] += said
    except ValueError as exc:
        raise fail(str(exc)) from None
    read = ("ttft", "kv_usage") * bool(ttft_p99) + ("e2e",) * (knee_rps is not None)
    for note in missing(server, read) if vllm or engine else []:
        warn(f"note: {note}: the rule on it is left out")
    _write(yaml.safe_dump(rules, sort_keys=False), out)
