"""The chart library, embedded: plotly.js's *basic* partial bundle, vendored (no CDN, works offline).

Every chart surgelab draws is a scatter or a bar trace, which the basic bundle (1.19 MB) holds;
the full bundle (4.8 MB) made every report.html nearly 5 MB. The file ships as package data
(``report/vendor``, with its MIT licence and how to refresh it), so no npm and no network are
needed to install or to render.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

__all__ = ["plotly_js", "plotly_js_path", "script_safe"]

_BUNDLE = Path(__file__).parent / "vendor" / "plotly-basic.min.js"


def plotly_js_path() -> Path:
    if not _BUNDLE.exists():  # pragma: no cover - a broken installation
        raise RuntimeError(f"{_BUNDLE} is missing: reinstall surgelab (the chart library ships inside it)")
    return _BUNDLE


@cache
def plotly_js() -> str:
    return plotly_js_path().read_text(encoding="utf-8")


def script_safe(text: str) -> str:
    """Text that can sit inside a <script> element without ending it early."""
    return text.replace("</", "<\\/").replace("<!--", "<\\!--")
