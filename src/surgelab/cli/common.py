"""What every command group shares: one-line errors and exit codes, flag parsing, scenario
loading, the target's TLS and proxy flags (``run`` and ``probe``), the live dashboard."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import typer
from pydantic import ValidationError
from rich.console import Console

from surgelab.analysis.verdict import EXIT_INTERRUPTED, EXIT_INVALID, EXIT_OK, EXIT_THRESHOLDS
from surgelab.conditions import Threshold
from surgelab.httpfields import header_value_problem
from surgelab.scenario import ScenarioError, load_scenario
from surgelab.scenario.model import Scenario
from surgelab.scenario.target import NamedTarget, Target
from surgelab.units import parse_duration, parse_ratio

__all__ = [
    "EXIT_OK", "EXIT_THRESHOLDS", "EXIT_USAGE", "EXIT_INVALID", "EXIT_INTERRUPTED", "fail", "warn", "parsed_option",
    "seconds_option", "ratio_option", "threshold_options", "load_or_exit", "api_key_of", "inputs_or_exit",
    "start_dashboard", "announce_end",
    "NETWORK_FLAGS", "ca_cert_option", "client_cert_option", "client_key_option", "server_name_option",
    "insecure_option", "proxy_option", "with_network_flags", "warn_insecure",
]  # fmt: skip

EXIT_USAGE = 2  # the others are the verdict's (analysis.verdict), which every page shows


def warn(line: str) -> None:
    """A line on stderr as it is (no markup): what a command says before it starts, even with --quiet."""
    Console(stderr=True).print(line, highlight=False, markup=False, soft_wrap=True)


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    """Print a one-line error (no traceback) and return the exit to raise."""
    console = Console(stderr=True)
    for line in message.splitlines():
        console.print(f"[red]error:[/] {line}", highlight=False, soft_wrap=True, markup=True)
    return typer.Exit(code)


def parsed_option(value: str | None, flag: str, parse: Callable[[str], float]) -> float | None:
    """A flag's text through ``parse`` (None stays None); a one-line error naming the flag otherwise."""
    if value is None:
        return None
    try:
        return parse(value)
    except ValueError as exc:
        raise fail(f"{flag}: {exc}") from None


def seconds_option(value: str | None, flag: str) -> float | None:
    """A duration flag (``30s``, ``250ms``) in seconds; a one-line error naming the flag otherwise."""
    return parsed_option(value, flag, parse_duration)


NETWORK_FLAGS = {
    "ca_cert": "target.tls.ca_cert", "client_cert": "target.tls.client_cert", "client_key": "target.tls.client_key",
    "server_name": "target.tls.server_name", "insecure": "target.tls.insecure", "proxy": "target.proxy",
}  # fmt: skip
"""The target's network flags, each with the scenario field it sets (docs/networks.md)."""


def ca_cert_option() -> Any:
    return typer.Option(None, help="PEM of the CA that signed the target's certificate.")


def client_cert_option() -> Any:
    return typer.Option(None, help="Mutual TLS: PEM client certificate.")


def client_key_option() -> Any:
    return typer.Option(None, help="Mutual TLS: its PEM key, if apart.")


def server_name_option() -> Any:
    return typer.Option(None, help="TLS name instead of the URL's host.")


def insecure_option() -> Any:
    return typer.Option(None, "--insecure", help="Do not verify the certificate (test benches).")


def proxy_option() -> Any:
    return typer.Option(None, help="Proxy URL or 'none' (default: HTTPS_PROXY…).")


TargetT = TypeVar("TargetT", bound=Target)


def with_network_flags(target: TargetT, **flags: Any) -> TargetT:
    """``target`` with the network flags given (None: not given) over its ``tls`` and ``proxy``;
    a one-line error naming the flag when one is wrong (a missing file, a SOCKS proxy)."""
    given = {k: str(v) if isinstance(v, Path) else v for k, v in flags.items() if v is not None}
    if not given:
        return target
    tls = {**target.tls.model_dump(), **{k: v for k, v in given.items() if k != "proxy"}}
    try:
        return type(target).model_validate({**target.model_dump(), "tls": tls, "proxy": given.get("proxy", target.proxy)})
    except ValidationError as exc:
        error = exc.errors()[0]
        name = str(error["loc"][-1]) if error["loc"] else ""
        flag = "--" + name.replace("_", "-") if name in NETWORK_FLAGS else "--client-key"
        raise fail(f"{flag}: {error['msg'].removeprefix('Value error, ')}") from None


def warn_insecure(console: Console, targets: Sequence[Target]) -> None:
    """The red line before anything is sent to an https:// target whose certificate is not checked."""
    for target in targets:
        if target.tls.insecure and target.base_url.startswith("https:"):
            console.print(
                f"[bold red]INSECURE:[/] the certificate of {target.base_url} is not verified (--insecure / "
                "target.tls.insecure): anyone on the path could answer instead — for test benches only",
                highlight=False,
            )


def load_or_exit(path: Path | None, overrides: dict[str, tuple[str, Any]]) -> Scenario:
    """The scenario, or a one-line error per problem (its API keys' variables checked too)."""
    try:
        scenario = load_scenario(path, overrides)
    except ScenarioError as exc:
        raise fail(str(exc)) from None
    for target in [scenario.target, *(scenario.targets or [])]:
        api_key_of(target)
    return scenario


def inputs_or_exit(scenario: Scenario, source: Path | str | None, say: Callable[[str], None]) -> None:
    """Read the files the scenario takes rows from before anything is sent: a file that cannot be
    used is a one-line error naming the field; ``say`` gets a warning per file that skipped rows."""
    from surgelab.load.inputs import InputError, input_report, skipped_warnings  # reads the files: not for --help

    try:
        report = input_report(scenario)
    except InputError as exc:
        raise fail(f"{source or 'command line'}: {exc}") from None
    for warning in skipped_warnings(report):
        say(f"warning: {warning}")


def api_key_of(target: Target) -> str | None:
    """The target's API key, from the variable ``target.api_key_env`` names (None when unset); a
    one-line error naming the variable, never the key, when the key cannot go in a header."""
    name = target.api_key_env
    key = os.environ.get(name) if name else None
    problem = header_value_problem(key) if key else None
    if problem:
        field = f"targets[{target.name}].api_key_env" if isinstance(target, NamedTarget) else "target.api_key_env"
        raise fail(f"${name} ({field}): the API key {problem}: set the variable to the key alone, one line of ASCII")
    return key


def ratio_option(value: str | None, flag: str) -> float | None:
    """A ratio flag (``1%``, ``0.01``) as a fraction; a one-line error naming the flag otherwise."""
    return parsed_option(value, flag, parse_ratio)


def threshold_options(exprs: list[str], flag: str) -> list[Threshold]:
    """Threshold expressions from a repeatable flag; a one-line error naming the flag for the first bad one."""
    out = []
    for expr in exprs:
        try:
            out.append(Threshold(expr=expr))
        except ValidationError as exc:
            raise fail(f"{flag}: {exc.errors()[0]['msg'].removeprefix('Value error, ')}") from None
    return out


def start_dashboard(scenario: Scenario, port: int, token: str | None) -> Any:
    """Start the live dashboard for ``scenario`` and print its URL (``--dashboard``)."""
    from surgelab.dashboard import Dashboard, DashboardSettings  # heavy: aiohttp app and page, only with --dashboard
    from surgelab.telemetry.scrape import scrape_sources

    scrape = tuple(scrape_sources(scenario.telemetry, [scenario.target, *(scenario.targets or [])]))
    board = Dashboard(DashboardSettings(port=port, token=token, title=scenario.name, scrape=scrape,
                                        bounds=dashboard_bounds(scenario)))  # fmt: skip
    try:
        url = board.start()
    except OSError as exc:
        raise fail(f"--dashboard-port {port}: cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
    Console().print(f"dashboard: {url}", highlight=False, soft_wrap=True)
    return board


def dashboard_bounds(scenario: Scenario) -> tuple[tuple[str, float], ...]:
    """What turns a dashboard card red: the validity bounds, and an ``error_rate <`` threshold."""
    bounds: list[tuple[str, float]] = [("lag_p99_ms", scenario.validity.max_lag_p99 * 1000.0)]
    if not scenario.validity.allow_drops:
        bounds.append(("dropped", 0.0))
    limits = [t.value for t in scenario.thresholds if t.metric == "error_rate" and t.op in ("<", "<=")]
    if limits:
        bounds.append(("error_rate", min(limits)))
    return tuple(bounds)


def announce_end(observers: Any, summary: dict[str, Any], report: Any = None) -> None:
    """Hand the run's verdict to the observers that keep it on screen (the dashboard's ``finish``)."""
    for observer in observers:
        finish = getattr(observer, "finish", None)
        if finish is not None:
            finish(summary, None if report is None else str(Path(report).resolve()))  # a link on the page: absolute
