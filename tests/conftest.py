"""Shared fixtures: scripted loopback servers with known timing, and helpers that run load.

The scripted servers are real subprocesses on real sockets, started once per session:
``timed_server`` sends the first token 200 ms after a request arrives and then one token
every 20 ms; ``zero_server`` answers without delay. The helpers are handed out as fixtures
(``scenario_for``, ``run``, ``reconciled``, ``cli``, ``worked_example``) rather than imported, because other test
folders may have a ``conftest`` module of their own; ``reconciled`` checks that every
scheduled request ended in exactly one state and returns the records.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from surgelab.aio import run_async
from surgelab.metrics.record import FAILED_STATES, State
from surgelab.metrics.store import PARTS_DIR, RECORDS_FILE, read_records
from surgelab.runner import RunResult, run_scenario
from surgelab.scenario.loader import build_scenario
from surgelab.scenario.model import Scenario
from surgelab.testing.process import ScriptedServerProcess

TTFT_S = 0.2
ITL_S = 0.02
_START_TIMEOUT_S = 15.0


class ScriptedServer(ScriptedServerProcess):
    """A session's scripted server: its ``url`` and what it counted."""

    @property
    def url(self) -> str:
        return self.base_url

    def stats(self) -> dict[str, Any]:
        """Requests, distinct TCP connections and the last Authorization header seen."""
        with urllib.request.urlopen(self.root_url + "/stats", timeout=5) as resp:
            return json.loads(resp.read())


@pytest.fixture(scope="session")
def timed_server() -> Iterator[ScriptedServer]:
    with ScriptedServer(TTFT_S, ITL_S, startup_timeout=_START_TIMEOUT_S) as server:
        yield server


@pytest.fixture(scope="session")
def zero_server() -> Iterator[ScriptedServer]:
    with ScriptedServer(0.0, 0.0, startup_timeout=_START_TIMEOUT_S) as server:
        yield server


def make_scenario(url: str, model: str = "ok", **sections: Any) -> Scenario:
    """A validated scenario for ``url``; ``sections`` merge into target/load/workload/..."""
    data: dict[str, Any] = {
        "target": {"url": url, "model": model},
        "load": {"rate": 10, "duration": "2s"},
        "workload": {"prompt_tokens": 16, "output_tokens": 4},
    }
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    if "concurrency" in data["load"]:
        data["load"].pop("rate", None)
    return build_scenario(data, source="test")


def run_load(scenario: Scenario, run_dir: Path, **kwargs: Any) -> RunResult:
    """Run ``scenario`` in this process (on uvloop, as the CLI does)."""
    return run_async(run_scenario(scenario, run_dir, **kwargs))


def check_reconciled(summary: dict[str, Any], run_dir: Path) -> pa.Table:
    """Every scheduled request is one row in records.parquet and in exactly one state."""
    requests = summary["requests"]
    assert requests["scheduled"] == (
        requests["ok"] + requests["failed"] + requests["dropped"] + requests["cancelled"] + requests["lost"]
    )
    assert sum(requests["by_state"].values()) == requests["scheduled"]
    assert requests["failed"] == sum(requests["by_state"][s.value] for s in FAILED_STATES)
    assert (run_dir / RECORDS_FILE).is_file()
    assert not (run_dir / PARTS_DIR).exists(), "parts are merged away at a clean finish"
    table = read_records(run_dir)
    assert table.num_rows == requests["scheduled"]
    ids = table["id"].to_pylist()
    assert sorted(ids) == list(range(len(ids))), "one row per scheduled request, ids without gaps"
    states = table["state"].to_pylist()
    assert set(states) <= {s.value for s in State}
    for state in State:
        assert states.count(state.value) == requests["by_state"][state.value]
    return table


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str
    elapsed_s: float


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> CliResult:
    """``python -m surgelab ARGS`` as a subprocess (real signals, real exit codes)."""
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "surgelab", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)


@pytest.fixture(scope="session")
def scenario_for() -> Callable[..., Scenario]:
    return make_scenario


@pytest.fixture(scope="session")
def run() -> Callable[..., RunResult]:
    return run_load


@pytest.fixture(scope="session")
def reconciled() -> Callable[[dict[str, Any], Path], pa.Table]:
    return check_reconciled


@pytest.fixture(scope="session")
def cli() -> Callable[..., CliResult]:
    return run_cli


def architecture_example(heading: str, path: str) -> tuple[str, str]:
    """A worked example of docs/architecture.md, by its section's heading: the new module (whose first
    line names ``path``) and the registry lines, its first two python blocks."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    module, registry = re.findall(r"```python\n(.*?)```", doc.split(f"## {heading}\n", 1)[1], flags=re.S)[:2]
    assert module.startswith(f"# {path}\n"), f"the example under {heading!r} is {path}"
    return module, registry


@pytest.fixture(scope="session")
def worked_example() -> Callable[[str, str], tuple[str, str]]:
    return architecture_example
