"""Small dependency-free charts: a terminal area chart and inline SVG, for previews.

The full HTML reports embed a proper chart library; these exist so that a scenario can be
looked at before anything is installed or sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

import numpy as np

__all__ = ["terminal_chart", "terminal_bars", "svg_line_chart", "svg_bar_chart"]

_BLOCKS = " ▁▂▃▄▅▆▇█"

Numbers = Sequence[float] | np.ndarray
"""What a chart plots: a list of numbers or a numpy array of them."""


def terminal_chart(values: Numbers, width: int = 60, height: int = 8, label: str = "") -> str:
    """An area chart of ``values`` resampled to ``width`` columns, ``height`` rows of blocks."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return "(no data)"
    columns = np.array_split(data, min(width, data.size))
    heights = np.array([c.max() for c in columns])
    top = float(heights.max()) or 1.0
    scaled = heights / top * height
    rows = []
    for row in range(height, 0, -1):
        line = "".join(_BLOCKS[int(np.clip(round((h - (row - 1)) * 8), 0, 8))] for h in scaled)
        axis = f"{top:>8.3g} ┤" if row == height else f"{'':>8} │"
        rows.append(axis + line)
    rows.append(f"{0:>8} └" + "─" * len(scaled) + (f" {label}" if label else ""))
    return "\n".join(rows)


def terminal_bars(edges: Numbers, counts: Numbers, width: int = 40) -> str:
    """A horizontal histogram: one line per bin."""
    bins = np.asarray(counts)
    top = bins.max() if bins.size and bins.max() else 1
    lines = []
    for lo, hi, n in zip(edges[:-1], edges[1:], bins):
        bar = "█" * int(round(n / top * width))
        lines.append(f"{lo:>8.0f}–{hi:<8.0f} {bar} {n}")
    return "\n".join(lines)


def _frame(width: int, height: int, title: str, body: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">'
        f'<text x="4" y="14" font-weight="bold">{escape(title)}</text>{body}</svg>'
    )


def svg_line_chart(
    series: Mapping[str, tuple[Numbers, Numbers]], title: str, x_label: str, y_label: str,
    width: int = 720, height: int = 260,
) -> str:  # fmt: skip
    """Several (x, y) series on shared axes."""
    palette = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2"]
    left, right, top, bottom = 56, 12, 24, 36
    xs = [np.asarray(x, float) for x, _ in series.values()] or [np.zeros(1)]
    ys = [np.asarray(y, float) for _, y in series.values()] or [np.zeros(1)]
    x_max = max(float(x.max()) if x.size else 0 for x in xs) or 1.0
    y_max = max(float(y.max()) if y.size else 0 for y in ys) or 1.0
    w, h = width - left - right, height - top - bottom

    def px(x: np.ndarray, y: np.ndarray) -> str:
        return " ".join(f"{left + xi / x_max * w:.1f},{top + h - yi / y_max * h:.1f}" for xi, yi in zip(x, y))

    body = [f'<line x1="{left}" y1="{top + h}" x2="{left + w}" y2="{top + h}" stroke="#888"/>',
            f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + h}" stroke="#888"/>']  # fmt: skip
    for k in range(5):
        yv = y_max * k / 4
        tick = top + h - k / 4 * h
        body.append(f'<text x="{left - 4}" y="{tick + 4:.1f}" text-anchor="end">{yv:.3g}</text>')
        xv = x_max * k / 4
        body.append(f'<text x="{left + k / 4 * w:.1f}" y="{top + h + 14}" text-anchor="middle">{xv:.3g}</text>')
    body.append(f'<text x="{left + w / 2}" y="{height - 4}" text-anchor="middle">{escape(x_label)}</text>')
    body.append(f'<text x="12" y="{top + h / 2}" transform="rotate(-90 12 {top + h / 2})" text-anchor="middle">{escape(y_label)}</text>')
    for i, (name, (x, y)) in enumerate(series.items()):
        color = palette[i % len(palette)]
        body.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{px(np.asarray(x, float), np.asarray(y, float))}"/>')
        body.append(f'<text x="{left + w - 4}" y="{top + 12 + 13 * i}" text-anchor="end" fill="{color}">{escape(name)}</text>')
    return _frame(width, height, title, "".join(body))


def svg_bar_chart(edges: Numbers, counts: Numbers, title: str, x_label: str, width: int = 350, height: int = 200) -> str:
    """A histogram."""
    left, right, top, bottom = 40, 8, 24, 34
    bins = np.asarray(counts, dtype=float)
    w, h = width - left - right, height - top - bottom
    top_count = bins.max() if bins.size and bins.max() else 1.0
    bw = w / max(len(bins), 1)
    body = [f'<line x1="{left}" y1="{top + h}" x2="{left + w}" y2="{top + h}" stroke="#888"/>']
    for i, n in enumerate(bins):
        bh = n / top_count * h
        body.append(f'<rect x="{left + i * bw:.1f}" y="{top + h - bh:.1f}" width="{max(bw - 1, 1):.1f}" height="{bh:.1f}" fill="#2563eb"/>')
    body.append(f'<text x="{left}" y="{top + h + 14}">{edges[0]:.0f}</text>')
    body.append(f'<text x="{left + w}" y="{top + h + 14}" text-anchor="end">{edges[-1]:.0f}</text>')
    body.append(f'<text x="{left + w / 2}" y="{height - 4}" text-anchor="middle">{escape(x_label)}</text>')
    return _frame(width, height, title, "".join(body))
