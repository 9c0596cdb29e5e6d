"""What a scenario will do, computed without sending anything: ``surgelab preview``.

The planned level of every phase over time, the real open-loop schedule counted per second
(so burstiness shows), the request mix with token-length distributions sampled from the
very generators the run will use, and the in-flight count Little's Law predicts for a
given latency.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

import numpy as np
from rich.console import Console
from rich.table import Table

from surgelab.load.phases import open_loop_offsets, plan_phases
from surgelab.report.charts import svg_bar_chart, svg_line_chart, terminal_bars, terminal_chart
from surgelab.scenario.model import Scenario
from surgelab.units import SECOND

__all__ = ["Preview", "compute_preview", "render_terminal", "render_html"]

_SAMPLES = 4000


@dataclass
class PhasePreview:
    name: str
    mode: str
    unit: str
    start_s: float
    end_s: float
    description: str
    level: np.ndarray  # planned level at each second of the run
    sends_per_s: np.ndarray | None  # open loop: the actual schedule, counted per second
    planned_requests: int | None


@dataclass
class ClassPreview:
    phase: str
    name: str
    share: float
    tier: str
    endpoint: str
    session: str
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray


@dataclass
class Preview:
    name: str
    duration_s: float
    latency_s: float
    think_s: float
    times: np.ndarray
    phases: list[PhasePreview]
    classes: list[ClassPreview]
    in_flight: np.ndarray  # expected requests in flight at each second


def compute_preview(scenario: Scenario, latency_s: float) -> Preview:
    plans = plan_phases(scenario)
    duration = max(p.end_ns for p in plans) / SECOND
    times = np.arange(0, int(np.ceil(duration)) + 1, dtype=float)
    phases, classes = [], []
    in_flight = np.zeros_like(times)
    for plan in plans:
        load = plan.phase.load
        start, end = plan.start_ns / SECOND, plan.end_ns / SECOND
        inside = (times >= start) & (times < end)
        level = np.where(inside, load.shape.level(np.clip(times - start, 0, None)), 0.0)
        sends = planned = None
        if load.mode == "open":
            offsets = open_loop_offsets(scenario, plan.index) / SECOND + start
            sends = np.bincount(offsets.astype(np.int64), minlength=len(times))[: len(times)].astype(float)
            planned = len(offsets)
            in_flight += level * latency_s
        else:
            think = load.think_time.mean
            in_flight += level * latency_s / (latency_s + think) if latency_s + think > 0 else level
        unit = "req/s" if load.mode == "open" else "users"
        phases.append(PhasePreview(plan.phase.name, load.mode, unit, start, end, load.describe(), level, sends, planned))
        classes += _classes(plan)
    think = float(np.mean([p.load.think_time.mean for p in scenario.phase_list if p.load.mode == "closed"] or [0.0]))
    return Preview(scenario.name, duration, latency_s, think, times, phases, classes, in_flight)


def _classes(plan) -> list[ClassPreview]:
    sampler = plan.sampler
    base = getattr(sampler, "base", sampler)  # a replay samples lengths from its trace
    count = min(_SAMPLES, len(getattr(sampler, "rows", range(_SAMPLES))))
    specs = [sampler.spec(i, text=False, media=False) for i in range(count)]  # sizes only: no text, image or audio made
    result = []
    for cls in base.classes:
        mine = [s for s in specs if s.request_class == cls.name]
        session = "–"
        if cls.session is not None:
            session = f"{cls.session.turns.mean:.3g} turns, think {cls.session.think_time.mean:.3g}s"
        result.append(
            ClassPreview(
                phase=plan.phase.name,
                name=cls.name,
                share=len(mine) / len(specs) if specs else 0.0,
                tier=cls.tier,
                endpoint=cls.endpoint or "target's",
                session=session,
                prompt_tokens=np.array([s.prompt_tokens for s in mine]),
                output_tokens=np.array([s.max_tokens for s in mine]),
            )
        )
    return result


def _pcts(values: np.ndarray) -> str:
    if not values.size:
        return "–"
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return f"{values.mean():,.0f} / {p50:,.0f} / {p90:,.0f} / {p99:,.0f}"


def _histogram(values: np.ndarray, bins: int = 10) -> tuple[np.ndarray, np.ndarray]:
    counts, edges = np.histogram(values, bins=bins)
    return edges, counts


def render_terminal(preview: Preview, console: Console) -> None:
    console.print(f"[bold]{preview.name}[/]: {len(preview.phases)} phase(s), {preview.duration_s:,.1f}s in all")
    for p in preview.phases:
        console.print(f"\n[bold]{p.name}[/] ({p.mode} loop, {p.start_s:g}s → {p.end_s:g}s): {p.description}")
        console.print(terminal_chart(p.level, label=f"planned {p.unit} over {preview.duration_s:,.0f}s"), highlight=False)
        if p.sends_per_s is not None:
            console.print(f"scheduled sends per second ({p.planned_requests:,} requests):")
            console.print(terminal_chart(p.sends_per_s, height=5), highlight=False)
    table = Table(title="request mix (tokens: mean / p50 / p90 / p99)", title_justify="left")
    for col in ("phase", "class", "share", "tier", "endpoint", "prompt tokens", "output tokens", "session"):
        table.add_column(col)
    for c in preview.classes:
        table.add_row(c.phase, c.name, f"{c.share:.1%}", c.tier, c.endpoint, _pcts(c.prompt_tokens), _pcts(c.output_tokens), c.session)
    console.print(table)
    for c in preview.classes:
        if c.prompt_tokens.size:
            console.print(f"{c.phase}/{c.name} prompt tokens:")
            console.print(terminal_bars(*_histogram(c.prompt_tokens)), highlight=False)
    peak = float(preview.in_flight.max()) if preview.in_flight.size else 0.0
    mean = float(preview.in_flight.mean()) if preview.in_flight.size else 0.0
    console.print(
        f"\nexpected in flight at W = {preview.latency_s:g}s (Little's Law, L = λ·W): "
        f"[bold]{peak:,.1f}[/] at peak, {mean:,.1f} on average — the concurrency the target must hold"
    )


def render_html(preview: Preview) -> str:
    """A self-contained page (inline SVG, no scripts) for sharing a scenario's plan."""
    t = preview.times
    level = svg_line_chart(
        {f"{p.name} ({p.unit})": (t, p.level) for p in preview.phases}, "Planned load", "seconds", "level"
    )
    parts = [level]
    sends = {p.name: (t, p.sends_per_s) for p in preview.phases if p.sends_per_s is not None}
    if sends:
        parts.append(svg_line_chart(sends, "Scheduled sends per second", "seconds", "requests"))
    parts.append(
        svg_line_chart({"expected in flight": (t, preview.in_flight)}, f"In flight at W = {preview.latency_s:g}s", "seconds", "requests")
    )
    rows = "".join(
        f"<tr><td>{escape(c.phase)}</td><td>{escape(c.name)}</td><td>{c.share:.1%}</td><td>{escape(c.tier)}</td>"
        f"<td>{_pcts(c.prompt_tokens)}</td><td>{_pcts(c.output_tokens)}</td><td>{escape(c.session)}</td></tr>"
        for c in preview.classes
    )
    hists = "".join(
        svg_bar_chart(*_histogram(c.prompt_tokens), f"{c.phase}/{c.name}: prompt tokens", "tokens")
        + svg_bar_chart(*_histogram(c.output_tokens), f"{c.phase}/{c.name}: output tokens", "tokens")
        for c in preview.classes
        if c.prompt_tokens.size
    )
    return (
        "<!doctype html><meta charset='utf-8'>"
        f"<title>surgelab preview: {escape(preview.name)}</title>"
        "<style>body{font-family:sans-serif;margin:24px;max-width:980px}table{border-collapse:collapse}"
        "td,th{border:1px solid #ddd;padding:4px 8px;font-size:13px}</style>"
        f"<h1>{escape(preview.name)}</h1><p>{len(preview.phases)} phase(s), {preview.duration_s:,.1f} s. "
        + "".join(f"<br><b>{escape(p.name)}</b>: {escape(p.description)}" for p in preview.phases)
        + "</p>"
        + "".join(f"<div>{svg}</div>" for svg in parts)
        + "<h2>Request mix</h2><table><tr><th>phase</th><th>class</th><th>share</th><th>tier</th>"
        "<th>prompt tokens mean/p50/p90/p99</th><th>output tokens</th><th>session</th></tr>"
        + rows
        + "</table>"
        + hists
    )
