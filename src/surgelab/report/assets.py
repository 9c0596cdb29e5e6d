"""The chart library, embedded: plotly.js from the ``plotly`` package (no CDN, works offline).

The one place that touches the optional-looking dependency; it is a declared dependency, so a
missing file means a broken installation and says so.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

__all__ = ["plotly_js", "plotly_js_path", "script_safe"]


def plotly_js_path() -> Path:
    try:
        import plotly  # heavy: only its package path is needed, when a report or dashboard is written
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise RuntimeError("HTML reports need the 'plotly' package (pip install plotly)") from exc
    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


@cache
def plotly_js() -> str:
    return plotly_js_path().read_text(encoding="utf-8")


def script_safe(text: str) -> str:
    """Text that can sit inside a <script> element without ending it early."""
    return text.replace("</", "<\\/").replace("<!--", "<\\!--")
