"""``surgelab proxy``: the fault-injection reverse proxy in front of any target."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import typer

from surgelab.cli import app

_FAULTS = "Faults"


@app.command("proxy")
def proxy_command(
    upstream: str = typer.Option(..., help="Where to forward, e.g. http://127.0.0.1:8000 (paths are kept)."),
    listen: str = typer.Option("127.0.0.1:8100", help="HOST:PORT to listen on (loopback by default; port 0 picks one)."),
    latency: str | None = typer.Option(None, help="Added before forwarding: 100ms, or uniform 50ms..200ms.", rich_help_panel=_FAULTS),
    jitter_per_chunk: str | None = typer.Option(None, help="Each response chunk held a further uniform [0, this).", rich_help_panel=_FAULTS),
    drop: str | None = typer.Option(None, help="Probability of aborting a connection (TCP reset), e.g. 0.3%.", rich_help_panel=_FAULTS),
    drop_point: str | None = typer.Option(None, help="Where drops happen: any, start or mid-stream.", rich_help_panel=_FAULTS),
    bandwidth: str | None = typer.Option(None, help="Bytes per second through the proxy, e.g. 1MB/s or 10Mbit/s.", rich_help_panel=_FAULTS),
    error_rate: str | None = typer.Option(None, help="Probability of answering --error-status without asking upstream.", rich_help_panel=_FAULTS),
    error_status: int | None = typer.Option(None, help="Status of injected errors (default 503, with Retry-After).", rich_help_panel=_FAULTS),
    stall_mid_stream: str | None = typer.Option(None, help="Probability that a response hangs after its first chunk.", rich_help_panel=_FAULTS),
    stall_for: str | None = typer.Option(None, help="How long a stalled response hangs before it is closed (default 5m).", rich_help_panel=_FAULTS),
    schedule: Path | None = typer.Option(None, help="YAML list of {at: 10s, until: 30s, faults: {...}} windows.", rich_help_panel=_FAULTS),
    seed: int = typer.Option(0, help="Seed for every random fault decision."),
) -> None:
    """Forward traffic to a target and inject network and HTTP faults on the way (Ctrl-C stops it).

    Responses stream through chunk by chunk, so SSE stays incremental. GET /_proxy/stats
    counts what was injected.
    """
    from surgelab.aio import run_async
    from surgelab.proxy import Faults, ProxyConfig, ProxyConfigError, Schedule, read_schedule, run_proxy

    host, sep, port_text = listen.rpartition(":")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        _die(f"--listen {listen!r}: expected HOST:PORT, e.g. 127.0.0.1:8100")
    if not upstream.startswith(("http://", "https://")):
        _die(f"--upstream {upstream!r}: expected an http:// or https:// URL")
    knobs: dict[str, Any] = {
        "latency": latency, "jitter_per_chunk": jitter_per_chunk, "drop": drop, "drop_point": drop_point,
        "bandwidth": bandwidth, "error_rate": error_rate, "error_status": error_status,
        "stall_mid_stream": stall_mid_stream, "stall_for": stall_for,
    }  # fmt: skip
    try:
        base = Faults.from_mapping({k: v for k, v in knobs.items() if v is not None}, where="flags")
        plan = read_schedule(schedule, base) if schedule is not None else Schedule(base)
    except ProxyConfigError as exc:
        _die(str(exc))
    config = ProxyConfig(upstream=upstream, host=host.strip("[]"), port=int(port_text), schedule=plan, seed=seed)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            run_async(run_proxy(config))
    except OSError as exc:
        typer.echo(f"surgelab proxy: error: cannot listen on {listen}: {exc.strerror or exc}", err=True)
        raise typer.Exit(1) from None


def _die(message: str) -> None:
    typer.echo(f"surgelab proxy: error: {message}", err=True)
    raise typer.Exit(2)
