"""The command line's own help: -h, --version, and ``run --help`` grouped into panels that fit 80 columns."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from surgelab import __version__
from surgelab.cli import app
from surgelab.cli.panels import RUN_PANELS


def _invoke(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "80", "TERM": "dumb", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return result.output


def test_version_and_short_help():
    assert _invoke("--version").strip() == f"surgelab {__version__}"
    assert _invoke("-V").strip() == f"surgelab {__version__}"
    assert "Usage:" in _invoke("-h") and "Usage:" in _invoke("run", "-h")


def test_run_help_is_grouped_into_panels():
    text = _invoke("run", "--help")
    panels = re.findall(r"╭─ (.+?) ─", text)
    assert panels[:2] == ["Arguments", "Options"]
    assert sorted(panels[2:]) == ["Guards and pass/fail", "Load", "Output and live views", "Target", "Workload"]
    options = text.split("╭─ Options ", 1)[1].split("╰", 1)[0]
    assert re.findall(r"--[a-z-]+", options) == ["--help"]  # every other flag sits in its panel
    assert all(len(line) <= 80 for line in text.splitlines())
    assert len(text.splitlines()) < 136  # 43 options now in 130 lines; 33 took 140 lines in one flat panel
    assert "--dashboard" in text.split("╭─ Output and live views", 1)[1].split("╰", 1)[0]
    assert set(RUN_PANELS.values()) == set(panels[2:])
