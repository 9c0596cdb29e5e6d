"""Several targets: compare mode (identical schedules side by side) and route mode (weighted,
health-checked, with failover)."""

from __future__ import annotations

import json
import time

import pyarrow.parquet as pq
import pytest

from surgelab.aio import run_async
from surgelab.runner.compare import run_compare
from surgelab.server.process import ServerProcess, serve_process

M = ["--model", "m"]  # every target asks for model "m": each server serves that name


def _targets(*pairs, **extra):
    return [{"name": name, "url": url, "model": "m", **({"weight": w} if w is not None else {})} for name, url, w in pairs]


@pytest.fixture(scope="module")
def fast_and_slow():
    with serve_process(M, profile="tiny") as fast, serve_process([*M, "--max-num-seqs", "2"], profile="llama2-7b-a10") as slow:
        yield fast, slow


def test_compare_sends_the_same_schedule_and_finds_the_slower_target(fast_and_slow, scenario_for, reconciled, tmp_path) -> None:
    fast, slow = fast_and_slow
    scenario = scenario_for(
        fast, targets=_targets(("fast", fast, None), ("slow", slow, None)),
        routing={"mode": "compare", "record_responses": True},
        load={"rate": 8, "duration": "3s"}, workload={"prompt_tokens": 256, "output_tokens": 16},
    )  # fmt: skip
    done = run_async(run_compare(scenario, tmp_path / "cmp", record_responses=True))
    a = reconciled(done.results["fast"].summary, tmp_path / "cmp" / "fast")
    b = reconciled(done.results["slow"].summary, tmp_path / "cmp" / "slow")
    assert a["intended_ns"].to_pylist() == b["intended_ns"].to_pylist()
    from surgelab.report.compare import compare_runs

    verdicts = compare_runs([tmp_path / "cmp" / "fast", tmp_path / "cmp" / "slow"]).verdicts()
    assert verdicts["ttft_p50"] == "worse", verdicts  # the slow target's first tokens come later
    agreement = json.loads((tmp_path / "cmp" / "compare-index.json").read_text())["agreement"]["slow"]
    assert agreement["compared"] > 10 and agreement["exact"] is not None


def test_route_splits_by_weight_and_keeps_targets_apart(fast_and_slow, scenario_for, reconciled, tmp_path) -> None:
    fast, _ = fast_and_slow
    with serve_process(M, profile="tiny") as other:
        scenario = scenario_for(
            fast, targets=_targets(("a", fast, 80), ("b", other, 20)), routing={"mode": "route"},
            load={"rate": 100, "duration": "3s", "arrival": "constant"},
        )  # fmt: skip
        result = run_async(__import__("surgelab.runner", fromlist=["run_scenario"]).run_scenario(scenario, tmp_path / "r"))
    table = reconciled(result.summary, tmp_path / "r")
    targets = table["target"].to_pylist()
    share = targets.count("a") / len(targets)
    assert 0.72 <= share <= 0.88  # 300 draws at p = 0.8: a 4-sigma band
    by_target = result.summary["by_target"]
    assert set(by_target) == {"a", "b"}
    assert by_target["a"]["requests"]["ok"] == targets.count("a")
    assert result.summary["routing"]["events"] == []


def test_failover_happens_within_the_health_check_bound_and_counts_lost_requests(scenario_for, reconciled, tmp_path) -> None:
    crash_after = 1.5
    with ServerProcess([*M, "--crash-after", f"{crash_after}s"], profile="tiny") as primary, serve_process(M, profile="tiny") as backup:
        started = time.monotonic()
        scenario = scenario_for(
            primary.base_url, targets=_targets(("primary", primary.base_url, 80), ("backup", backup, 20)),
            routing={"mode": "route", "health": {"interval": "200ms", "timeout": "200ms", "failures": 2, "recovery": 2}},
            load={"rate": 50, "duration": "4s", "arrival": "constant"},
            target={"url": primary.base_url, "model": "m", "timeouts": {"connect": "500ms", "first_token": "1s", "total": "2s"}},
        )  # fmt: skip
        offset = time.monotonic() - started  # the server's clock started before the run's
        result = run_async(__import__("surgelab.runner", fromlist=["run_scenario"]).run_scenario(scenario, tmp_path / "r"))
    table = reconciled(result.summary, tmp_path / "r")
    routing = result.summary["routing"]
    downs = [e for e in routing["events"] if e["target"] == "primary" and e["event"] == "down"]
    assert downs, routing
    crash_on_run_clock = crash_after - offset
    # Taken out within failures × interval of the crash, plus one check's timeout and some slack.
    assert downs[0]["t_s"] - crash_on_run_clock <= 2 * 0.2 + 0.2 + 0.5
    primary_stats = routing["targets"]["primary"]
    assert primary_stats["lost_around_failover"] >= 1
    assert routing["targets"]["backup"]["rerouted_here"] > 0
    rows = table.to_pylist()
    after = [r for r in rows if r["intended_ns"] / 1e9 > downs[0]["t_s"] + 0.05]
    assert after and all(r["target"] == "backup" and r["state"] == "ok" for r in after)
    lost = sum(1 for r in rows if r["target"] == "primary" and r["state"] != "ok")
    assert lost == result.summary["by_target"]["primary"]["requests"]["failed"]
    assert pq.read_table(tmp_path / "r" / "records.parquet").num_rows == len(rows)
