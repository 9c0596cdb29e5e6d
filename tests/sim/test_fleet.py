"""Fleet behaviour: routing, failover, admission and priority, cache, autoscaling, outputs."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from surgelab.metrics.record import RECORD_SCHEMA
from surgelab.metrics.store import read_records

from .helpers import fleet, run, scenario

FAST = {"dist": "fixed", "value": 0.01}


def states(result) -> dict[str, int]:
    return {k: v for k, v in result.summary["requests"]["by_state"].items() if v}


def test_outputs_are_those_of_a_real_run(tmp_path):
    result = run(tmp_path, scenario({"rate": 10, "duration": "20s"}), fleet(pools=[{"replicas": 1, "profile": "tiny"}]))
    d = result.run_dir
    assert {p.name for p in d.iterdir()} >= {
        "records.parquet",
        "summary.json",
        "scenario.yaml",
        "run.json",
        "fleet.parquet",
        "fleet.json",
    }
    table = read_records(d)
    assert table.schema.equals(RECORD_SCHEMA, check_metadata=False)
    r = result.summary["requests"]
    assert r["scheduled"] == r["ok"] + r["failed"] + r["dropped"] + r["cancelled"] == table.num_rows
    timeline = pq.read_table(d / "fleet.parquet")
    assert {"t_s", "replicas", "ready", "queue_depth", "busy", "shed", "cache_hits"} <= set(timeline.column_names)
    assert result.summary["fleet"]["average_instances"] == pytest.approx(1.0, rel=0.01)


def test_closed_loop_users_reissue_after_response_and_think(tmp_path):
    load = {"concurrency": 4, "think_time": "0.5s", "duration": "30s"}
    result = run(tmp_path, scenario(load), fleet(pools=[{"replicas": 1, "concurrency": 4, "service_time": 0.5}]))
    # each user: 0.5 s service + 0.5 s think → 1 request/s each, 4 users, 30 s
    assert result.summary["requests"]["ok"] == pytest.approx(120, abs=4)
    t = read_records(result.run_dir)
    assert set(t["user"].to_pylist()) == {0, 1, 2, 3}


def test_weighted_routing_splits_80_20(tmp_path):
    pools = [{"name": "primary", "replicas": 2, "service_time": FAST, "concurrency": 100, "weight": 80},
             {"name": "backup", "replicas": 1, "service_time": FAST, "concurrency": 100, "weight": 20}]  # fmt: skip
    result = run(tmp_path, scenario({"rate": 20, "duration": "50s"}), fleet(pools=pools, router={"policy": "weighted"}))
    assert result.summary["requests"]["ok"] > 900
    primary, backup = (result.fleet["pools"][p]["dispatched"] for p in ("primary", "backup"))
    assert primary / (primary + backup) == pytest.approx(0.8, abs=0.001)


def test_failover_with_health_checks_measures_switch_over_and_losses(tmp_path):
    pools = [{"name": "primary", "replicas": 1, "profile": "tiny", "failures": {"crashes": [{"at": "20s"}], "recovery": "30s"}},
             {"name": "backup", "replicas": 1, "profile": "tiny"}]  # fmt: skip
    router = {"policy": "failover", "health_check": {"interval": "5s", "failures": 3, "recovery": 1}}
    result = run(
        tmp_path, scenario({"rate": 10, "duration": "90s", "arrival": "constant"}), fleet(pools=pools, router=router)
    )
    (crash,) = result.fleet["failures"]
    # failures from checks and requests count alike, as a live router's (load.health): the crash comes
    # first at 20 s (LIFECYCLE ranks before CONTROL), the check at 20 s fails, then the requests sent at
    # 20.0 and 20.1 s are refused → out at 20.1 s, after 3 failures
    assert crash["switch_over_s"] == pytest.approx(0.1)
    assert crash["lost_routed"] == 2  # each refused
    assert result.fleet["lost"] == crash["lost_routed"] + crash["lost_in_flight"]
    assert states(result)["connection_error"] == result.fleet["lost"]
    assert crash["back_at_s"] == pytest.approx(50.0)  # restarted at 50 s, passes the next check


def test_round_robin_and_least_outstanding_use_every_replica(tmp_path):
    pools = [{"replicas": 3, "service_time": 0.2, "concurrency": 10}]
    scen = scenario({"rate": 30, "duration": "10s"})
    counts = run(tmp_path, scen, fleet(pools=pools, router={"policy": "round_robin"}), "rr").fleet["pools"]["default"][
        "dispatched_by_replica"
    ]
    assert max(counts) - min(counts) <= 1
    counts = run(tmp_path, scen, fleet(pools=pools), "lor").fleet["pools"]["default"]["dispatched_by_replica"]
    assert min(counts) > 0.25 * sum(counts)  # about 6 in flight: spread by what each holds


def test_bounded_queue_sheds_with_status_and_serves_paid_first(tmp_path):
    workload = {"prompt_tokens": 8, "output_tokens": 1,
                "mix": [{"name": "paid", "tier": "paid", "weight": 1}, {"name": "free", "tier": "free", "weight": 1}]}  # fmt: skip
    scen = scenario({"rate": 30, "duration": "60s"}, workload=workload, tiers={"paid": {}, "free": {}})
    pools = [{"replicas": 1, "service_time": 0.05}]  # 20 requests/s of capacity for 30 arriving
    admission = {"max_depth": 20, "timeout": "2s", "shed_status": 503, "priority": ["paid", "free"]}
    result = run(tmp_path, scen, fleet(pools=pools, admission=admission))
    t = read_records(result.run_dir)
    shed = t.filter(pc.equal(t["state"], "http_error"))
    assert shed.num_rows == result.fleet["shed"] > 0
    assert set(shed["http_status"].to_pylist()) == {503}
    by_tier = result.summary["by_tier"]
    assert by_tier["paid"]["requests"]["failed"] < 0.05 * by_tier["free"]["requests"]["failed"]
    ok = t.filter(pc.equal(t["state"], "ok"))

    def wait(tier: str) -> float:
        rows = ok.filter(pc.equal(ok["tier"], tier))
        return float(np.mean(rows["first_byte_ns"].to_numpy() - rows["intended_ns"].to_numpy()))

    assert wait("paid") < wait("free")


def test_exact_cache_hits_follow_the_workload(tmp_path):
    # two prompts only: a dataset read in order repeats them
    data = tmp_path / "prompts.jsonl"
    data.write_text('{"prompt": "hello there", "output_tokens": 4}\n{"prompt": "good morning", "output_tokens": 4}\n')
    workload = {"output_tokens": 4, "unique_prefix": False, "dataset": {"path": str(data), "order": "sequential"}}
    scen = scenario({"rate": 10, "duration": "20s"}, workload=workload)
    result = run(tmp_path, scen, fleet(pools=[{"replicas": 1, "profile": "tiny"}], cache={"exact": True, "ttl": "5s"}))
    # one miss per prompt every 5 s (the TTL), the rest hit
    assert result.fleet["cache_hit_rate"] > 0.9
    timeline = pq.read_table(result.run_dir / "fleet.parquet")
    assert sum(timeline["cache_hits"].to_pylist()) == result.fleet["cache_hits"]


def test_autoscaler_scales_up_after_cold_start_and_back_down(tmp_path):
    load = {
        "rate": {
            "type": "spike",
            "base": 5,
            "peak": 40,
            "at": "60s",
            "rise": "5s",
            "hold": "120s",
            "decay": "5s",
            "after": "400s",
        }
    }
    pools = [{"replicas": 1, "service_time": 0.1, "concurrency": 4, "cold_start": "30s",
              "autoscale": {"metric": "in_flight", "target": 2, "min": 1, "max": 10}}]  # fmt: skip
    result = run(tmp_path, scenario(load), fleet(pools=pools))
    timeline = pq.read_table(result.run_dir / "fleet.parquet").to_pydict()
    replicas, ready, t = timeline["replicas"], timeline["ready"], timeline["t_s"]
    assert max(replicas) >= 2
    first_up = next(i for i, n in enumerate(replicas) if n > 1)
    assert ready[first_up] == 1  # not ready during the cold start
    assert ready[first_up + 31] > 1
    assert replicas[-1] == 1  # scaled back down after the 300 s stabilisation window
    decisions = result.fleet["pools"]["default"]["autoscaler"]
    assert all(d["desired"] <= 10 for d in decisions)
    assert t[-1] >= 589


def test_scale_to_zero_and_wake_on_request(tmp_path):
    load = {"rate": {"type": "stages", "stages": [{"duration": "30s", "target": 2}, {"duration": "1s", "target": 0},
                                                  {"duration": "200s", "target": 0}, {"duration": "1s", "target": 2},
                                                  {"duration": "30s", "target": 2}]}}  # fmt: skip
    pools = [{"replicas": 1, "service_time": 0.1, "cold_start": "10s",
              "autoscale": {"metric": "rps", "target": 5, "min": 0, "max": 3, "scale_to_zero": {"cooldown": "60s"}}}]  # fmt: skip
    result = run(tmp_path, scenario(load), fleet(pools=pools))
    timeline = pq.read_table(result.run_dir / "fleet.parquet").to_pydict()
    assert 0 in timeline["replicas"]
    assert result.summary["requests"]["ok"] == result.summary["requests"]["scheduled"]
    assert result.summary["latency_ms"]["e2e"]["max"] >= 10_000  # the request that woke the pool waited the cold start
    assert result.fleet["average_instances"] < 0.8


def test_prefix_reuse_skips_the_shared_system_prompt(tmp_path):
    workload = {"system_prompt_tokens": 1500, "prompt_tokens": 32, "output_tokens": 8}
    scen = scenario({"rate": 5, "duration": "20s"}, workload=workload)
    pools = [{"replicas": 1, "profile": "llama2-7b-a10"}]
    cold = run(tmp_path, scen, fleet(pools=pools), "cold").summary["latency_ms"]["ttft"]["p50"]
    warm = run(tmp_path, scen, fleet(pools=pools, cache={"prefix": True}), "warm").summary["latency_ms"]["ttft"]["p50"]
    assert warm < 0.5 * cold  # 1,500 prompt tokens at 216 µs each are no longer prefilled


@pytest.mark.parametrize(
    "metric,target", [("rps", 5), ("in_flight", 1), ("queue", 2), ("busy", 0.5), ("p99_latency", 0.3)]
)
def test_every_autoscaling_metric_scales_up_under_load(tmp_path, metric, target):
    pools = [
        {
            "replicas": 1,
            "service_time": 0.2,
            "concurrency": 2,
            "autoscale": {"metric": metric, "target": target, "max": 6},
        }
    ]
    result = run(tmp_path, scenario({"rate": 20, "duration": "90s"}), fleet(pools=pools))
    assert max(d["desired"] for d in result.fleet["pools"]["default"]["autoscaler"]) >= 3, metric


def test_exported_names_are_pinned():
    import surgelab.sim

    assert sorted(surgelab.sim.__all__) == [
        "Fleet", "FleetError", "Hpa", "SimResult", "build_fleet", "comparison_rows", "fleet_error_bar", "load_fleet",
        "simulate",
    ]  # fmt: skip


def test_crashes_drawn_by_mtbf_recover(tmp_path):
    pools = [{"replicas": 2, "service_time": 0.05, "concurrency": 4, "cold_start": "5s",
              "failures": {"mtbf": "30s", "recovery": "10s"}}]  # fmt: skip
    result = run(tmp_path, scenario({"rate": 20, "duration": "300s"}), fleet(pools=pools, seed=4))
    crashes = result.fleet["failures"]
    assert 8 <= len(crashes) <= 40  # about 2 replicas × 300 s ÷ (30 s up + 15 s down)
    assert all(c["switch_over_s"] == 0.0 for c in crashes)  # no health checks: the router knows at once
    back = [c for c in crashes if "back_at_s" in c]
    assert back and all(c["back_at_s"] == pytest.approx(c["at_s"] + 15.0) for c in back)  # recovery + cold start
    assert result.summary["requests"]["ok"] > 0.9 * result.summary["requests"]["scheduled"]


def test_prompt_texts_are_built_only_where_the_fleet_reads_them(tmp_path, monkeypatch):
    """Without a response or prefix cache only prompt lengths count, so the simulator leaves the texts
    unbuilt (``PromptFactory.spec(i, text=False)``): the records are those of building every text. With
    an exact cache the texts are built, and unique synthetic prompts never hit."""
    from surgelab.sim.traffic import Traffic

    workload = {"prompt_tokens": {"dist": "uniform", "min": 50, "max": 400}, "output_tokens": 20,
                "shared_prefix": {"fraction": 0.5, "tokens": 30}, "system_prompt_tokens": 10}  # fmt: skip
    scen = scenario({"rate": 20, "duration": "10s"}, workload=workload)
    pools = [{"replicas": 1, "profile": "llama3-8b-h100"}]
    lean = run(tmp_path, scen, fleet(pools=pools), "lean")
    init = Traffic.__init__
    monkeypatch.setattr(Traffic, "__init__", lambda self, s, texts=True, **kw: init(self, s, True, **kw))
    full = run(tmp_path, scen, fleet(pools=pools), "full")
    monkeypatch.setattr(Traffic, "__init__", init)
    records = pq.read_table(lean.run_dir / "records.parquet")
    assert records.num_rows > 150 and records.equals(pq.read_table(full.run_dir / "records.parquet"))
    cached = run(tmp_path, scen, fleet(pools=pools, cache={"exact": True}), "cached")
    assert cached.fleet["cache_hits"] == 0 and cached.summary["requests"]["ok"] == records.num_rows


def test_the_event_loop_collects_garbage_less_often_and_restores_the_collector(tmp_path, monkeypatch):
    """While the loop runs the young generation is collected rarely; the caller's thresholds come back, even on an error."""
    import gc

    from surgelab.sim import simulator as sim_module

    seen: list[tuple[int, int, int]] = []
    original = sim_module.Simulator._loop

    def loop(self, *args):
        seen.append(gc.get_threshold())
        return original(self, *args)

    before = gc.get_threshold()
    try:
        gc.set_threshold(900, 11, 12)
        monkeypatch.setattr(sim_module.Simulator, "_loop", loop)
        run(tmp_path, scenario({"rate": 10, "duration": "2s"}), fleet(pools=[{"replicas": 1, "profile": "tiny"}]))
        assert seen == [(sim_module._GC_YOUNG, 11, 12)] and gc.get_threshold() == (900, 11, 12)

        def broken(self, *args):
            raise RuntimeError("boom")

        monkeypatch.setattr(sim_module.Simulator, "_loop", broken)
        with pytest.raises(RuntimeError):
            run(
                tmp_path,
                scenario({"rate": 10, "duration": "2s"}),
                fleet(pools=[{"replicas": 1, "profile": "tiny"}]),
                "b",
            )
        assert gc.get_threshold() == (900, 11, 12)
    finally:
        gc.set_threshold(*before)


def test_the_simulated_switch_over_is_held_to_the_plans_bound(tmp_path):
    """The seeds' plan: checks every 15 s, out after 3 failures, switch-over < 30 s. Checks alone found a
    crash at 20 s at 60 s (40 s, the bound missed); failed requests count as a live router's do
    (``load.health``): the requests sent at 20.0, 20.2 and 20.4 s are refused and take the primary out."""
    pools = [{"name": "primary", "replicas": 1, "profile": "tiny", "failures": {"crashes": [{"at": "20s"}], "recovery": "60s"}},
             {"name": "backup", "replicas": 1, "profile": "tiny"}]  # fmt: skip
    seed = {"policy": "failover", "health_check": {"interval": "15s", "failures": 3, "max_switch_over": "30s"}}
    load = {"rate": 5, "duration": "90s", "arrival": "constant"}
    result = run(tmp_path, scenario(load), fleet(pools=pools, router=seed), "seed")
    block = result.summary["failover"]
    [switch] = block["switch_overs"]
    assert (switch["target"], switch["first_failure_s"], switch["taken_out"]) == ("primary/primary-0", 20.0, True)
    assert switch["taken_out_s"] == pytest.approx(20.4) and switch["switch_over_s"] == pytest.approx(0.4)
    assert (block["bound_s"], block["passed"]) == (30.0, True)
    assert result.summary["thresholds"][-1]["expr"] == "switch_over < 30s" and result.summary["thresholds"][-1]["passed"]
    assert result.fleet["failures"][0]["lost_routed"] == 3  # with checks alone, every request for 40 s
    # with no requests to fail, the checks alone take it out: at 30, 45 and 60 s, 40 s after the crash
    idle = {**load, "rate": 0.01}
    quiet = run(tmp_path, scenario(idle), fleet(pools=pools, router=seed), "idle").summary["failover"]
    assert (quiet["worst_s"], quiet["passed"]) == (40.0, False)
    # checks alone every 5 s meet it (20, 25, 30 s); the bound may come from the scenario's routing.health as well
    fast = {"policy": "failover", "health_check": {"interval": "5s", "failures": 3}}
    bounded = scenario(idle, routing={"health": {"max_switch_over": "30s"}})
    quick = run(tmp_path, bounded, fleet(pools=pools, router=fast), "fast").summary["failover"]
    assert (quick["worst_s"], quick["passed"]) == (10.0, True)
