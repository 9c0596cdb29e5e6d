"""The worker split on a local Ray instance yields one complete run."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")

from surgelab.aio import run_async  # noqa: E402
from surgelab.runner.ray_backend import run_on_ray  # noqa: E402


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    yield
    ray.shutdown()


def test_a_ray_run_on_a_local_instance_yields_a_complete_summary(local_ray, zero_server, scenario_for, run, reconciled, tmp_path) -> None:
    scenario = scenario_for(zero_server.url, load={"rate": 30, "duration": "2s"})
    result = run_async(run_on_ray(scenario, tmp_path / "ray", 2, "auto"))
    table = reconciled(result.summary, tmp_path / "ray")
    single = run(scenario, tmp_path / "one")
    assert table["intended_ns"].to_pylist() == reconciled(single.summary, tmp_path / "one")["intended_ns"].to_pylist()
    assert set(table["worker"].to_pylist()) == {0, 1}
    assert result.summary["requests"]["ok"] == result.summary["requests"]["scheduled"]
    import json

    nodes = json.loads((tmp_path / "ray" / "run.json").read_text())["ray"]["nodes"]
    assert len(nodes) == 2 and all(abs(n["offset_ms"]) < 50 for n in nodes)  # one host: the clocks agree
