"""``surgelab run``, ``validate`` and ``schema`` (placeholder until the runner lands)."""

from __future__ import annotations

from surgelab.cli import app


@app.command("version")
def version() -> None:
    """Print the surgelab version."""
    from surgelab import __version__

    print(__version__)
