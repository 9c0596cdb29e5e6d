"""The chart library, embedded: plotly.js from the ``plotly`` package (no CDN, works offline).

The one place that touches the optional-looking dependency; it is a declared dependency, so a
missing file means a broken installation and says so.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

__all__ = ["plotly_js", "plotly_js_bytes", "script_safe"]


@cache
def plotly_js() -> str:
    try:
        import plotly
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise RuntimeError("HTML reports need the 'plotly' package (pip install plotly)") from exc
    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    return path.read_text(encoding="utf-8")


@cache
def plotly_js_bytes() -> bytes:
    return plotly_js().encode("utf-8")


def script_safe(text: str) -> str:
    """Text that can sit inside a <script> element without ending it early."""
    return text.replace("</", "<\\/").replace("<!--", "<\\!--")
