"""The simulation page: what a capacity engineer reads from a cold start (issue 30)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

SCENARIO = """name: cold
target: {url: 'http://127.0.0.1:9/v1', model: m}
load: {rate: {type: step, start: 4, step: 36, hold: 10s, max: 40}, duration: 30s}
workload: {prompt_tokens: 100, output_tokens: 32}
slo: {e2e: 1s}
"""
# one replica, then the HPA asks for five at 15 s; each new one loads its model for 10 s
FLEET = """name: cold10
pools: [{name: a10, profile: llama2-7b-a10, replicas: 1, cold_start: 10s, cost_per_hour: 2.0,
         autoscale: {metric: rps, target: 8, min: 1, max: 6, sync_period: 5s}}]
"""


def test_a_cold_start_is_seen_with_its_cost_waits_and_scaling(tmp_path, surgelab_cli, browser, narrow):
    """Only ``replicas`` was drawn, so five provisioned and one ready looked like five serving; the
    3,058 requests waiting inside replicas, utilisation, scaling events, average instances,
    replica-hours and cost were nowhere; the fleet chart ended at the last sample (991 of 1,004.5 s)."""
    (tmp_path / "s.yaml").write_text(SCENARIO)
    (tmp_path / "f.yaml").write_text(FLEET)
    out = tmp_path / "sim"
    done = surgelab_cli("simulate", str(tmp_path / "s.yaml"), "--fleet", str(tmp_path / "f.yaml"), "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((out / "summary.json").read_text())
    report = json.loads((out / "fleet.json").read_text())
    end_s = json.loads((out / "run.json").read_text())["simulated_end_s"]
    rows = pq.read_table(out / "fleet.parquet").to_pylist()
    assert rows[-1]["t_s"] < end_s - 1  # the trap: the timeline stops sampling before the run's end
    page = browser(offline=True).new_page()
    page.goto((out / "report.html").as_uri())
    page.wait_for_function("window.SURGELAB_READY === true", timeout=20_000)
    fleet = page.evaluate("Object.fromEntries(document.getElementById('chart-fleet').data.map(t => [t.name, t.y]))")
    assert list(fleet) == ["provisioned", "ready"]
    behind = [i for i, (asked, ready) in enumerate(zip(fleet["provisioned"], fleet["ready"])) if ready < asked]
    assert behind and fleet["provisioned"][behind[0]] == 5 and fleet["ready"][behind[0]] == 1  # the cold start, visible
    assert 9 <= len(behind) <= 11  # for the 10 s the new replicas loaded their model
    said = page.inner_text("#cold-start")
    assert "not ready for 10 s" in said and "1 of 5 replicas were ready" in said
    # the requests waited inside the replicas, not in the router's queue
    waits = page.evaluate(
        "Object.fromEntries(document.getElementById('chart-fleet-requests').data.map(t => [t.name, t.y]))"
    )
    assert sum(waits["waiting inside replicas"]) == sum(r["engine_waiting"] for r in rows) > 0
    assert sum(waits["router queue"]) == 0
    busy = [v for v in page.evaluate("document.getElementById('chart-fleet-util').data[0].y") if v is not None]
    assert all(0 <= v <= 100 for v in busy) and max(busy) > 90  # one replica saturated before the scale-up
    [event] = [d for d in report["pools"]["a10"]["autoscaler"] if d["desired"] != d["current"]]
    cells = page.evaluate(
        "Array.from(document.querySelectorAll('#scaling-table tr')).slice(1).map(r => Array.from(r.cells).map(c => c.innerText))"
    )
    assert cells == [[f"{event['time_s']:.0f}", "a10", "1 → 5", f"{event['metric']:.2f}"]]
    # the cards are summary.json's fleet block, which is fleet.json's
    f = summary["fleet"]
    assert (f["average_instances"], f["replica_hours"], f["cost"]) == (
        report["average_instances"],
        report["replica_hours"],
        report["cost"],
    )
    value = lambda card: page.inner_text(f"#card-{card} .value")  # noqa: E731
    assert value("avg_instances") == f"{f['average_instances']:.2f}"
    assert value("replica_hours") == f"{f['replica_hours']:.3f}h"
    assert value("cost") == f"{f['cost']:.2f}"
    for chart in ("chart-fleet", "chart-fleet-requests", "chart-fleet-util", "chart-fleet-cost"):  # the whole run
        low, high = page.evaluate(f"document.getElementById('{chart}')._fullLayout.xaxis.range")
        assert low == 0 and high == end_s, (chart, low, high)
    narrow(page)
