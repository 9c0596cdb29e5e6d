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


def test_a_killed_ray_actor_loses_only_its_unpulled_records_and_the_run_says_so(local_ray, zero_server, scenario_for, tmp_path) -> None:
    """SIGKILL of one actor mid-run: no exception, the survivor's records all there, the dead
    one's records pulled before it died kept, every planned request in one state, run invalid."""
    import asyncio
    import json
    import os
    import re
    import signal

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from surgelab.metrics.store import read_records

    out, rate, duration = tmp_path / "run", 40, 4
    scenario = scenario_for(
        zero_server.url, load={"rate": rate, "arrival": "constant", "duration": f"{duration}s"},
        output={"flush_interval": "0.25s"},
    )  # fmt: skip
    before: dict = {}

    async def kill_worker_0() -> None:
        parts = out / "records.parts"
        for _ in range(600):  # 60 s at most
            await asyncio.sleep(0.1)
            if len(list(parts.glob("w000-part-*"))) >= 2:
                break
        assert list(parts.glob("w000-part-*")), "no record of worker 0 reached the run directory while the run went on"
        before["flushed"] = pq.read_table(sorted(parts.glob("w000-part-*"))[0])
        nodes = json.loads((out / "run.json").read_text())["ray"]["nodes"]
        os.kill(nodes[0]["pid"], signal.SIGKILL)

    async def both():
        return (await asyncio.gather(run_on_ray(scenario, out, 2, "auto", start_delay_s=0.5), kill_worker_0()))[0]

    result = run_async(both())  # no ActorDiedError: the run ends with a summary
    summary, table = result.summary, read_records(out)
    planned = rate * duration
    assert table.num_rows == summary["requests"]["scheduled"] == planned
    assert sorted(table["id"].to_pylist()) == list(range(planned))
    survivor = table.filter(pc.equal(table["worker"], 1))
    assert survivor.num_rows == planned // 2 and set(survivor["state"].to_pylist()) == {"ok"}
    kept = dict(zip(table["id"].to_pylist(), table["state"].to_pylist()))
    flushed = before["flushed"]
    assert all(kept[i] == s for i, s in zip(flushed["id"].to_pylist(), flushed["state"].to_pylist()))
    lost = table.filter(pc.equal(table["state"], "lost"))
    assert summary["requests"]["lost"] == lost.num_rows > 0 and set(lost["worker"].to_pylist()) == {0}
    assert not summary["validity"]["valid"]
    found = re.fullmatch(
        r"worker 0 died at [\d.]+ s: (\d+) planned requests not sent, (\d+) in flight or unflushed lost",
        summary["validity"]["reasons"][0],
    )
    assert found and int(found[1]) + int(found[2]) == lost.num_rows and int(found[1]) > 0
    assert "ActorDiedError" in json.loads((out / "run.json").read_text())["worker_losses"][0]["cause"]


def test_a_search_on_ray_finds_what_the_local_search_finds(local_ray, tmp_path) -> None:
    """plan --search --ray: the simulations run as Ray actors (one per CPU of the cluster, here 2)
    and the search ends where the same search on two local processes ends, configuration for configuration."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent / "sim"))
    from test_search import _space  # the small space of the search tests

    from surgelab.plan.search import search

    space, base, scenario = _space(tmp_path, model=["qwen2.5-7b"], weights=["bf16"], seeds=0)
    on_ray = search(space, base, scenario, ray="auto")
    here = search(space, base, scenario, workers=2)  # the same batches of two
    assert [(o.status, o.replicas) for o in on_ray.outcomes] == [(o.status, o.replicas) for o in here.outcomes]
    assert on_ray.winner is not None and on_ray.winner.candidate == here.winner.candidate
    assert on_ray.simulations == here.simulations


def test_a_ray_run_feeds_the_exporter_every_request(local_ray, zero_server, scenario_for, tmp_path) -> None:
    """The observers (--prometheus-port, --dashboard) see a Ray run's records, pulled from the actors."""
    from surgelab.dashboard import Dashboard, DashboardSettings
    from surgelab.telemetry.exporter import Exporter

    scenario = scenario_for(zero_server.url, load={"rate": 20, "arrival": "constant", "duration": "2s"})
    exporter, board = Exporter("ray"), Dashboard(DashboardSettings())
    result = run_async(run_on_ray(scenario, tmp_path / "ray", 2, "auto", observers=[exporter, board]))
    assert result.summary["requests"]["ok"] == result.summary["requests"]["scheduled"] == 40
    labels = {"run": "ray", "state": "ok", "phase": "main", "request_class": "default"}
    assert exporter.registry.get_sample_value("surgelab_requests_total", labels) == 40
    assert exporter.registry.get_sample_value("surgelab_e2e_seconds_count", {"run": "ray"}) == 40
    assert board.history and board.history[-1]["ok"] == 40 and board.history[-1]["recent_n"] > 0


def test_a_ray_run_scrapes_the_servers_telemetry(local_ray, scenario_for, tmp_path) -> None:
    """The driver scrapes telemetry sources as worker processes' coordinator does (before, a Ray run had none)."""
    from surgelab.server.process import serve_process

    with serve_process(["--max-num-seqs", "4", "--model", "m"], profile="tiny") as url:
        metrics = url.removesuffix("/v1") + "/metrics"
        scenario = scenario_for(url, model="m", load={"rate": 10, "duration": "2s"},
                                telemetry={"interval": "250ms", "sources": [{"url": metrics, "name": "engine"}]})  # fmt: skip
        result = run_async(run_on_ray(scenario, tmp_path / "ray", 2, "auto", start_delay_s=0.5))
    source = result.summary["telemetry"]["sources"]["engine"]
    assert source["preset"] == "vllm" and source["failed"] == 0 and source["scrapes"] >= 4
    assert (tmp_path / "ray" / "telemetry.parquet").is_file()
