"""Every scenario in examples/ runs, briefly, against the embedded server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from surgelab.runner import run_scenario
from surgelab.scenario.loader import build_scenario
from surgelab.server.process import serve_process

EXAMPLES = sorted((Path(__file__).parents[1] / "examples").glob("*.yaml"))
TRACES = Path(__file__).parents[1].parent / "shared" / "data" / "traces"


@pytest.fixture(scope="module")
def embedded_url():
    with serve_process(profile="tiny") as url:
        yield url


def _shorten(data: dict, url: str) -> dict:
    """The example as written, but two seconds long and pointed at the embedded server."""
    if "target" in data:
        data["target"]["url"] = url
    for target in data.get("targets", []):
        target["url"] = url
    data.pop("thresholds", None)  # a two-second run is not the one the thresholds were written for
    loads = [data["load"]] if "load" in data else [phase["load"] for phase in data["phases"]]
    for load in loads:
        load.update(duration="2s", warmup="0s", grace="2s")
    for index, phase in enumerate(data.get("phases", [])):
        phase.update(start=f"{0.5 * index}s", jitter="0s")
    return data


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(path: Path, embedded_url: str, tmp_path: Path) -> None:
    if "replay" in path.read_text() and not TRACES.is_dir():
        pytest.skip(f"public traces not found at {TRACES}")
    data = _shorten(yaml.safe_load(path.read_text()), embedded_url)
    scenario = build_scenario(data, source=str(path), base_dir=path.parent)
    result = asyncio.run(run_scenario(scenario, tmp_path / "run"))
    s = result.summary
    r = s["requests"]
    assert r["scheduled"] == r["ok"] + r["failed"] + r["dropped"] + r["cancelled"]
    assert r["ok"] > 0, s
    assert r["failed"] == 0, s["requests"]["by_state"]
    expected_classes = {c.name for p in scenario.phase_list for c in scenario.workload_of(p).classes}
    assert set(s["by_class"]) <= expected_classes
    assert set(s["by_phase"]) == {p.name for p in scenario.phase_list}
