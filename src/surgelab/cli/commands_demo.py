"""``surgelab demo``: a complete, offline first run against the embedded server.

It starts ``surgelab serve`` as a real subprocess with a realistic profile and a small
running batch, then climbs a step ramp of closed-loop users, holding each level, so the
printed table shows throughput flattening and time-to-first-token rising at the knee.
Each level is an ordinary run directory under ``--out``.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from surgelab.cli import app
from surgelab.cli.common import fail

DEMO_LEVELS = (1, 4, 16, 48)


def _level_scenario(url: str, model: str, users: int, hold: float, warmup: float) -> Any:
    from surgelab.scenario import load_scenario

    overrides = {
        "name": ("", f"demo-{users:03d}-users"),
        "target.url": ("", url),
        "target.model": ("", model),
        "load.concurrency": ("", users),
        "load.duration": ("", hold + warmup),
        "load.warmup": ("", warmup),
        "load.grace": ("", 5),
        "workload.prompt_tokens": ("", {"dist": "uniform", "min": 128, "max": 512}),
        "workload.output_tokens": ("", 64),
        "slo.ttft": ("", "500ms"),
        "thresholds": ("", ["p99(ttft) < 2s", "error_rate < 1%"]),
    }
    return load_scenario(None, overrides)


@app.command("demo")
def demo(
    quick: bool = typer.Option(False, "--quick", help="About 15 s instead of about a minute."),
    out: Path | None = typer.Option(None, help="Directory for the level runs (default runs/demo-<time>)."),
    profile: str = typer.Option("llama3-8b-h100", help="Engine profile of the embedded server."),
    max_num_seqs: int = typer.Option(16, help="Running-batch limit of the server, so the knee shows early."),
) -> None:
    """Start the embedded server, run a step ramp of users against it, print what happened."""
    from surgelab.aio import run_async
    from surgelab.metrics.rundir import RunDirError
    from surgelab.runner import run_scenario
    from surgelab.server.process import ServerProcess, ServerStartError

    console = Console()
    hold, warmup = (2.5, 0.5) if quick else (12.0, 2.0)
    out = out or Path(f"runs/demo-{datetime.now():%Y%m%d-%H%M%S}")
    if out.exists() and any(out.iterdir()):
        raise fail(f"{out} is not empty; choose another --out")
    args = ["--max-num-seqs", str(max_num_seqs)]
    console.print(f"starting the embedded server (profile {profile}, max {max_num_seqs} sequences in a batch)…")
    table = Table(title=f"step ramp against surgelab serve --profile {profile} (latencies in ms)",
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)  # fmt: skip  # fits 80 columns
    for col in ("users", "req/s", "tok/s", "TTFT\np50", "TTFT\np99", "ITL\np50", "E2E\np99", "in\nflight", "errors"):
        table.add_column(col, justify="right", no_wrap=True)
    try:
        with ServerProcess(args, profile=profile) as server:
            model = _served_model(server.base_url)
            for users in DEMO_LEVELS:
                scenario = _level_scenario(server.base_url, model, users, hold, warmup)
                console.print(f"  {users:>3} users for {hold + warmup:g}s …")
                result = run_async(run_scenario(scenario, out / f"{users:03d}-users"))
                table.add_row(*_row(users, result.summary))
    except ServerStartError as exc:
        raise fail(str(exc)) from None
    except RunDirError as exc:
        raise fail(str(exc)) from None
    console.print(table)
    console.print(
        "Throughput grows with users until the server's batch is full "
        f"({max_num_seqs} sequences); beyond it requests queue and TTFT rises while req/s stays flat — the knee."
    )
    console.print(f"run directories: {out}/<level>/ (summary.json, records.parquet, scenario.yaml)", highlight=False)


def _served_model(base_url: str) -> str:
    import json
    import urllib.request

    with urllib.request.urlopen(base_url + "/models", timeout=5) as response:
        return json.load(response)["data"][0]["id"]


def _row(users: int, s: dict[str, Any]) -> list[str]:
    lat = s["latency_ms"]

    def ms(v: float | None) -> str:
        return "–" if v is None else f"{v:,.0f}"

    return [
        str(users),
        f"{s['throughput']['requests_per_s']:.1f}",
        f"{s['throughput']['output_tokens_per_s']:,.0f}",
        ms(lat["ttft"]["p50"]),
        ms(lat["ttft"]["p99"]),
        ms(lat["itl"]["p50"]),
        ms(lat["e2e"]["p99"]),
        f"{s['concurrency']['mean_in_flight']:.1f}" if s["concurrency"]["mean_in_flight"] is not None else "–",
        f"{s['requests']['failed']}",
    ]
