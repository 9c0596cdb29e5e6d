"""``surgelab serve``: the embedded OpenAI-compatible server on the engine model."""

from __future__ import annotations

import dataclasses
import ssl
from pathlib import Path
from typing import Any

import typer

from surgelab.cli import app

_FAULTS = "Faults"
_ENGINE = "Engine"


def _engine_override(help_text: str) -> Any:
    """An optional flag (a whole number, at least 1) that overrides the profile's, listed under Engine in --help."""
    return typer.Option(None, min=1, help=help_text, rich_help_panel=_ENGINE)


def _fault_option(help_text: str) -> Any:
    """An optional flag listed under Faults in --help."""
    return typer.Option(None, help=help_text, rich_help_panel=_FAULTS)


@app.command("serve")
def serve_command(
    host: str = typer.Option("127.0.0.1", help="Address to bind (loopback by default; any other needs --token-env)."),
    token_env: str | None = typer.Option(
        None, help="NAME of an environment variable holding an access token: callers send Authorization: Bearer TOKEN."
    ),
    port: int = typer.Option(8000, help="Port to bind; 0 picks a free one."),
    tls_cert: Path | None = typer.Option(None, help="Serve HTTPS with this PEM certificate chain (and key, unless --tls-key)."),
    tls_key: Path | None = typer.Option(None, help="PEM key of --tls-cert, when in a file of its own."),
    tls_client_ca: Path | None = typer.Option(
        None, help="Mutual TLS: require client certificates signed by this PEM CA."
    ),
    profile: str = typer.Option("llama3-8b-h100", help="Profile name or a .yaml/.json file."),
    model: str | None = typer.Option(None, help="Model name to serve (default: the profile's)."),
    seed: int = typer.Option(0, help="Seed for output lengths, text and faults."),
    session_header: str = typer.Option(
        "X-Session-ID", help="Echo this request header in the answer and count the requests carrying it (sessions pinned by a router)."
    ),
    typical_output_tokens: int = typer.Option(
        128, min=1, help="Median output length when the caller does not force one."
    ),
    tool_calls: float = typer.Option(
        1.0, min=0.0, max=1.0, help="Share of requests offering tools (and bringing no tool result) answered with a tool call."
    ),
    max_num_seqs: int | None = _engine_override("Override: most sequences in the running batch."),
    kv_capacity: int | None = _engine_override("Override: KV-cache capacity in tokens."),
    max_batched_tokens: int | None = _engine_override("Override: token budget per step."),
    max_model_len: int | None = _engine_override("Override: longest prompt plus output, in tokens (long-context presets)."),
    prefix_caching: bool = typer.Option(
        True,
        "--prefix-caching/--no-prefix-caching",
        help="Reuse KV of shared prompt prefixes.",
        rich_help_panel=_ENGINE,
    ),
    faults: Path | None = _fault_option("YAML file of fault knobs; flags override it."),
    error_rate: str | None = _fault_option("Fraction answered with an error, e.g. 2% or 0.02."),
    error_status: str | None = _fault_option("Status of injected errors (default 500)."),
    max_inflight: str | None = _fault_option("Rate limit: 429 beyond this many requests in flight."),
    retry_after: str | None = _fault_option("Retry-After on a 429 (default 1s)."),
    spike_probability: str | None = _fault_option("Fraction of requests delayed by --spike-delay."),
    spike_delay: str | None = _fault_option("Delay added by a latency spike, e.g. 500ms."),
    cold_start: str | None = _fault_option("'Model load' time begun by the first request."),
    crash_after: str | None = _fault_option("Exit (status 1) this long after start."),
    stall_after: str | None = _fault_option("Stop answering anything this long after start."),
    leak_per_request: str | None = _fault_option("Bytes kept for ever per request: a memory leak for a soak to find."),
) -> None:
    """Serve an OpenAI-compatible API backed by the engine model (Ctrl-C stops it)."""
    from surgelab.engine import ProfileError, load_profile
    from surgelab.server import ConfigError, FaultConfig, ServerConfig, read_fault_file, serve

    flags: dict[str, Any] = {
        "error_rate": error_rate,
        "error_status": error_status,
        "max_inflight": max_inflight,
        "retry_after": retry_after,
        "spike_probability": spike_probability,
        "spike_delay": spike_delay,
        "cold_start": cold_start,
        "crash_after": crash_after,
        "stall_after": stall_after,
        "leak_per_request": leak_per_request,
    }
    overrides = {
        "max_num_seqs": max_num_seqs,
        "kv_capacity_tokens": kv_capacity,
        "max_batched_tokens": max_batched_tokens,
        "max_model_len": max_model_len,
    }
    from surgelab.exposure import exposure_error, token_from_env

    token = token_from_env(token_env)
    if token_env and not token:
        typer.echo(f"surgelab serve: error: --token-env {token_env}: the variable is not set", err=True)
        raise typer.Exit(2)
    refusal = exposure_error(host, token, "surgelab serve", "--token-env NAME")
    if refusal:
        typer.echo(f"surgelab serve: error: {refusal}", err=True)
        raise typer.Exit(2)
    try:
        engine_profile = load_profile(profile)
        given: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}  # EngineProfile fields by name
        engine_profile = dataclasses.replace(engine_profile, **given)
        errors = engine_profile.validate()
        if errors:
            raise ProfileError("; ".join(errors))
        knobs = read_fault_file(faults) if faults is not None else {}
        knobs.update({k: v for k, v in flags.items() if v is not None})
        config = ServerConfig(
            profile=engine_profile,
            host=host,
            port=port,
            model=model,
            seed=seed,
            prefix_caching=prefix_caching,
            typical_output_tokens=typical_output_tokens,
            session_header=session_header,
            tool_call_fraction=tool_calls,
            faults=FaultConfig.from_mapping(knobs),
            token=token,
            tls_cert=str(tls_cert) if tls_cert else None,
            tls_key=str(tls_key) if tls_key else None,
            tls_client_ca=str(tls_client_ca) if tls_client_ca else None,
        )
    except (ProfileError, ConfigError) as exc:
        typer.echo(f"surgelab serve: error: {exc}", err=True)
        raise typer.Exit(2) from None
    if tls_cert is None and (tls_key or tls_client_ca):
        typer.echo("surgelab serve: error: --tls-key and --tls-client-ca need --tls-cert", err=True)
        raise typer.Exit(2)
    try:
        serve(config)
    except ssl.SSLError as exc:  # a certificate or key that does not load
        typer.echo(f"surgelab serve: error: --tls-cert/--tls-key: {exc}", err=True)
        raise typer.Exit(2) from None
    except OSError as exc:  # e.g. the port is taken
        typer.echo(f"surgelab serve: error: {exc.strerror or exc}", err=True)
        raise typer.Exit(1) from None
