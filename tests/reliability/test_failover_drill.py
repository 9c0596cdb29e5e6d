"""The seeds' failover drill in both clocks: checks every 15 s, out after 3 failures, switch-over < 30 s.

One health state machine (``load.health.HealthState``) decides for the live router
(``client.routing``) and the simulated one (``sim.router``): failures from checks and requests
alike. Live: two ``surgelab serve`` on loopback, 80/20, the primary stopped mid-run, its requests
refused. Simulated: the same scenario, the primary pool crashing where the live one did. Both
take the primary out after its first three refused requests, well inside the bound; checks alone
took the simulated primary out 40 s after a crash (the checks at 30, 45 and 60 s after one at 20 s).
"""

from __future__ import annotations

import json
import threading

import pyarrow.parquet as pq

from surgelab.scenario.loader import build_scenario
from surgelab.server.process import ServerProcess
from surgelab.sim import build_fleet, simulate

HEALTH = {"interval": "15s", "timeout": "1s", "failures": 3, "max_switch_over": "30s"}
LOAD = {"rate": 8, "arrival": "constant", "duration": "6s", "grace": "1s"}


class _KillAfter:
    """An observer that stops ``server`` ``delay_s`` after the first answer: a primary that dies mid-run."""

    def __init__(self, server: ServerProcess, delay_s: float) -> None:
        self.timer = threading.Timer(delay_s, server.stop)

    def observe(self, meta, out) -> None:
        if not self.timer.is_alive() and not self.timer.finished.is_set():
            self.timer.start()

    def update(self, snapshot) -> None:
        pass


def test_the_seeds_drill_switches_over_alike_live_and_simulated(run, tmp_path) -> None:
    out = tmp_path / "live"
    with ServerProcess() as primary, ServerProcess() as backup:
        data = {
            "name": "failover-drill", "seed": 7,
            "targets": [{"name": "primary", "url": primary.base_url, "weight": 80},
                        {"name": "backup", "url": backup.base_url, "weight": 20}],
            "routing": {"mode": "route", "health": HEALTH},
            "target": {"url": primary.base_url, "model": "surgelab-tiny", "timeouts": {"first_token": "2s"}},
            "load": LOAD, "workload": {"prompt_tokens": 16, "output_tokens": 8},
        }  # fmt: skip
        killer = _KillAfter(primary, 2.0)
        run(build_scenario(data), out, observers=[killer])
        killer.timer.join(10)
    live = json.loads((out / "summary.json").read_text())["failover"]
    [switch] = live["switch_overs"]
    assert switch["target"] == "primary" and switch["taken_out"], live
    crashed_s = switch["first_failure_s"]  # the first request the dead primary refused
    assert 1 < crashed_s < 5

    records = pq.read_table(out / "records.parquet", columns=["target", "sent_ns"]).to_pylist()
    before = [r["sent_ns"] / 1e9 for r in records if r["target"] == "primary" and r["sent_ns"] / 1e9 < crashed_s]
    last_ok_s = max(before)  # the crash came after it
    pools = [{"name": "primary", "replicas": 1, "profile": "tiny", "weight": 80,
              "failures": {"crashes": [{"at": f"{(last_ok_s + crashed_s) / 2:.3f}s"}], "recovery": "60s"}},
             {"name": "backup", "replicas": 1, "profile": "tiny", "weight": 20}]  # fmt: skip
    router = {"policy": "weighted", "health_check": {k: v for k, v in HEALTH.items() if k != "timeout"}}
    scen = build_scenario(
        {k: v for k, v in data.items() if k not in ("targets", "routing")} | {"routing": {"health": HEALTH}}
    )
    simulated = simulate(scen, build_fleet({"pools": pools, "router": router}), tmp_path / "sim").summary["failover"]
    [sim_switch] = simulated["switch_overs"]
    assert sim_switch["taken_out"]

    assert live["passed"] is True and simulated["passed"] is True  # both within the seeds' 30 s
    assert switch["switch_over_s"] < 1.5 and sim_switch["switch_over_s"] < 1.5  # three refused requests at 8 req/s
    assert abs(switch["switch_over_s"] - sim_switch["switch_over_s"]) < 0.75, (switch, sim_switch)
    print(f"switch-over live {switch['switch_over_s']:.2f} s, simulated {sim_switch['switch_over_s']:.2f} s")
