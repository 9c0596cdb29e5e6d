"""``surgelab plan --search SPACE``: the cheapest fleet that meets the SLO, and the front of cost against P99."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from surgelab.cli.common import fail


def run_search(
    space_file: Path, workers: int, out: Path | None, force: bool, console: Console, ray: str | None = None
) -> None:
    from surgelab.plan.search import search, workload
    from surgelab.plan.search_output import write_search
    from surgelab.plan.space import SpaceError, load_space, varying
    from surgelab.scenario.loader import ScenarioError

    try:
        space, base = load_space(space_file)
        scenario = workload(space, base)
    except (SpaceError, ScenarioError) as exc:
        raise fail(str(exc)) from None
    except ValueError as exc:
        raise fail(f"{space_file}: {exc}") from None
    from surgelab.ray_cluster import RayUnavailable

    try:
        result = search(space, base, scenario, workers=workers, ray=ray,
                        on_progress=lambda m: console.print(m, highlight=False))  # fmt: skip
    except RayUnavailable as exc:
        raise fail(str(exc)) from None
    data = result.to_dict()
    console.print(
        f"{data['configurations']} configurations ({', '.join(f'{v} {k}' for k, v in data['by_status'].items())}), "
        f"{result.simulations} simulations in {result.wall_s:.0f} s",
        highlight=False,
    )
    table = Table(
        title=f"cheapest passing at {result.peak:g} req/s ({', '.join(t.expr for t in space.slo)})",
        box=None,
        padding=(0, 1),
    )
    for head in ("configuration", "replicas", "robust", "cost/h", "P99 TTFT ms", "P99 E2E ms", ""):
        table.add_column(head, justify="left" if head in ("configuration", "") else "right", no_wrap=True)
    passed = sorted((o for o in result.outcomes if o.status == "passed"), key=lambda o: o.cost_per_hour or 0.0)
    shown = varying([o.candidate for o in result.outcomes])  # the table shows what differs; the line below, all
    for o in passed[:10]:
        t = o.latency
        mark = "chosen" if o is result.winner else "front" if o in result.front else ""
        counts = (o.replicas_text, "") if o.candidate.autoscale else (str(o.replicas), str(o.robust_replicas or ""))
        table.add_row(o.candidate.label(shown) or "the one configuration", *counts, f"{o.cost_per_hour:,.2f}",
                      f"{t.p99_ttft_ms:,.0f}" if t and t.p99_ttft_ms else "", f"{t.p99_e2e_ms:,.0f}" if t and t.p99_e2e_ms else "", mark)  # fmt: skip
    console.print(table)
    reasons: dict[str, int] = {}
    for o in result.outcomes:
        if o.status == "pruned":
            kind = o.reason.split(":", 1)[0]
            reasons[kind] = reasons.get(kind, 0) + 1
    if reasons:
        console.print("pruned by physics: " + ", ".join(f"{n} {k}" for k, n in reasons.items()), highlight=False)
    if result.winner is None:
        console.print("[red]no configuration in the space passed[/]")
    else:
        w = result.winner
        seeds = f"{space.seeds} more seed{'s' * (space.seeds != 1)}"
        held = (f"it holds with {seeds} and at the engine model's slow end; the mean is the highest of those runs"
                if w.candidate.autoscale else
                f"passed with {w.replicas}; {w.robust_replicas} hold with {seeds} and at the engine model's slow end")
        fleet = (f"{w.candidate.label()} (mean {w.mean_replicas:.1f} replicas, {w.peak_replicas} at most)" if w.candidate.autoscale
                 else f"{w.replicas_text} × {w.candidate.label()}")  # fmt: skip
        console.print(f"[bold]cheapest: {fleet}, {w.cost_per_hour:,.2f} per hour[/] ({held})",
                      highlight=False)  # fmt: skip
        if result.error_text:
            console.print(f"engine model: {result.error_text}", highlight=False, soft_wrap=True)
    if out is not None:
        try:
            paths = write_search(result, out, force)
        except ValueError as exc:
            raise fail(str(exc)) from None
        except OSError as exc:
            raise fail(f"search not written: {exc}") from None
        console.print(f"wrote {', '.join(str(p) for p in paths)}", highlight=False, soft_wrap=True)
    if result.winner is None:
        raise SystemExit(1)
