"""Plan arithmetic against hand-computed cases, Erlang C against textbook values, valid HPA and rules."""

from __future__ import annotations

import math

import pytest
import yaml

from surgelab.plan.fleet import FleetInputs, lognormal_cdf, size_fleet
from surgelab.plan.forecast import PeakError, peak_from
from surgelab.plan.k8s import HpaSpec, capacity_alert_rules, dump_yaml, hpa_manifest, quantity
from surgelab.plan.queueing import erlang_c, mmc, servers_for_wait


def test_seeds_example_peak_1000_at_safety_0_7():
    # 1000 ÷ (100 × 0.7) = 14.29 → 15 instances; at the peak they run at 1000 ÷ 1500 = 66.7 %.
    plan = size_fleet(FleetInputs(peak=1000, capacity=100, safety=0.7))
    assert plan.base == plan.total == 15
    assert plan.per_instance_target == pytest.approx(70)
    assert plan.utilisation_at_peak == pytest.approx(1000 / 1500)
    assert plan.headroom_at_peak == pytest.approx(1 / 3)
    assert "ceil(1000 ÷ 70) = ceil(14.29) = 15" in "\n".join(plan.arithmetic)


def test_seeds_demo_service_needs_one_instance():
    # The seeds' Python demo: peak effective QPS ≈ 10,144 at 80 concurrent (16 GB ÷ 0.2 GB,
    # latency 0.05 ÷ log2(81) s); 1000 ÷ (10,144 × 0.7) = 0.14 → 1 instance, as it prints.
    capacity = 80 / (0.05 / math.log2(81))
    assert capacity == pytest.approx(10144, rel=1e-3)
    assert size_fleet(FleetInputs(peak=1000, capacity=capacity, safety=0.7)).total == 1


def test_exact_multiples_are_not_rounded_up_and_spares_add():
    assert size_fleet(FleetInputs(peak=700, capacity=100, safety=0.7)).base == 10
    plan = size_fleet(FleetInputs(peak=700, capacity=100, safety=0.7, spares=2, gpus_per_instance=8, gpu_hour_cost=2.5))
    assert plan.total == 12 and plan.gpus == 96
    assert plan.cost_per_hour == pytest.approx(12 * 8 * 2.5)
    assert plan.cost_per_month == pytest.approx(240 * 730)


def test_availability_table_rises_with_instances():
    plan = size_fleet(FleetInputs(peak=1000, capacity=100, safety=0.7, peak_cv=0.2))
    p = [row["p_sla"] for row in plan.table]
    assert p == sorted(p) and plan.table[0]["instances"] == 13 and plan.table[-1]["instances"] == 18
    fifteen = next(r for r in plan.table if r["instances"] == 15)
    assert fifteen["p_sla_one_down"] == pytest.approx(lognormal_cdf(1400, 1000, 0.2))


def test_lognormal_cdf_known_points():
    # median of a lognormal with mean m and CV c is m / sqrt(1 + c²)
    assert lognormal_cdf(1000 / math.sqrt(1.04), 1000, 0.2) == pytest.approx(0.5)
    sigma = math.sqrt(math.log(1.04))
    x = 1000 / math.sqrt(1.04) * math.exp(1.6448536 * sigma)  # the 95th percentile
    assert lognormal_cdf(x, 1000, 0.2) == pytest.approx(0.95, abs=1e-6)
    assert lognormal_cdf(999, 1000, 0.0) == 0.0 and lognormal_cdf(1000, 1000, 0.0) == 1.0


def test_bad_fleet_inputs_are_listed():
    problems = FleetInputs(peak=-1, capacity=0, safety=1.5, spares=-1).problems()
    assert len(problems) == 4
    with pytest.raises(ValueError, match="safety"):
        size_fleet(FleetInputs(peak=10, capacity=10, safety=0))


# Erlang C. Closed forms (Kleinrock, Queueing Systems Vol. 1, 1975, §3.4-3.5):
# M/M/1: P(wait) = ρ, Wq = ρ/(μ − λ); M/M/2: P(wait) = 2ρ²/(1 + ρ), Wq = P(wait)/(2μ − λ).
@pytest.mark.parametrize("rho", [0.1, 0.5, 0.9])
def test_mm1(rho):
    r = mmc(rate=rho, service_time=1.0, servers=1)
    assert r.p_wait == pytest.approx(rho)
    assert r.mean_wait == pytest.approx(rho / (1 - rho))
    assert r.mean_queue == pytest.approx(rho**2 / (1 - rho))


@pytest.mark.parametrize("rho", [0.25, 0.5, 0.8])
def test_mm2(rho):
    r = mmc(rate=2 * rho, service_time=1.0, servers=2)
    assert r.p_wait == pytest.approx(2 * rho**2 / (1 + rho))
    assert r.mean_wait == pytest.approx(r.p_wait / (2 - 2 * rho))


def test_erlang_c_tabulated_values():
    # The classic call-centre example: 10 Erlangs on 11 agents wait with probability 0.682;
    # and the issue's example: λ = 10/s, S = 0.5 s, 8 servers → a = 5, P(wait) = 0.1673.
    assert erlang_c(11, 10.0) == pytest.approx(0.6821, abs=1e-4)
    r = mmc(10, 0.5, 8)
    assert r.offered_erlangs == 5 and r.utilisation == pytest.approx(0.625)
    assert r.p_wait == pytest.approx(0.16727, abs=1e-5)
    assert r.mean_wait == pytest.approx(0.16727 * 0.5 / 3, abs=1e-5)
    assert erlang_c(1000, 950.0) < 1 and erlang_c(3, 3.0) == 1.0  # no overflow; saturated


def test_servers_for_target_wait_and_instability():
    r = servers_for_wait(10, 0.5, 0.01)
    assert r.servers == 10 and r.mean_wait <= 0.01
    assert mmc(10, 0.5, 9).mean_wait > 0.01  # one fewer is not enough
    assert not mmc(10, 0.5, 5).stable and math.isinf(mmc(10, 0.5, 5).mean_wait)
    with pytest.raises(ValueError):
        mmc(-1, 0.5, 2)


def test_hpa_manifest_is_valid_autoscaling_v2():
    spec = HpaSpec("vllm", min_replicas=2, max_replicas=16, metric="inflight", target=5.6, namespace="ai")
    text = dump_yaml(hpa_manifest(spec))
    doc = yaml.safe_load(text)
    assert doc["apiVersion"] == "autoscaling/v2" and doc["kind"] == "HorizontalPodAutoscaler"
    assert doc["metadata"] == {
        "name": "vllm",
        "namespace": "ai",
        "labels": {"app.kubernetes.io/managed-by": "surgelab"},
    }
    s = doc["spec"]
    assert s["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm"}  # required
    assert s["maxReplicas"] == 16 and s["minReplicas"] == 2  # maxReplicas is required
    metric = s["metrics"][0]
    assert metric["type"] == "Pods"
    assert metric["pods"] == {
        "metric": {"name": "vllm_num_requests_running"},
        "target": {"type": "AverageValue", "averageValue": "5600m"},
    }
    for direction in ("scaleUp", "scaleDown"):
        rules = s["behavior"][direction]
        assert set(rules) == {"stabilizationWindowSeconds", "selectPolicy", "policies"}
        assert all(
            set(p) == {"type", "value", "periodSeconds"} and p["type"] in ("Pods", "Percent") for p in rules["policies"]
        )
    with pytest.raises(ValueError):
        hpa_manifest(HpaSpec("x", 5, 2, "rps", 1.0))


def test_quantities_and_alert_rules():
    assert quantity(12) == "12" and quantity(12.5) == "12500m" and quantity(0.25) == "250m"
    doc = yaml.safe_load(dump_yaml(capacity_alert_rules(35.0, 50.0, 0.5)))
    rules = doc["groups"][0]["rules"]
    assert {r["alert"] for r in rules} == {
        "InferenceNearKnee", "InferenceAboveSlaCapacity", "InferenceQueueNotDraining", "InferenceTtftP99AboveSlo",
    }  # fmt: skip
    assert all({"alert", "expr", "labels", "annotations"} <= set(r) for r in rules)
    assert "> 35" in rules[0]["expr"] and "vllm:request_success_total" in rules[0]["expr"]


def test_peak_from_number_scenario_and_bad_input(tmp_path):
    assert peak_from("1000").rate == 1000
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "target: {url: 'http://127.0.0.1:9/v1', model: m}\n"
        "load: {rate: {type: spike, base: 2, peak: 20, at: 10s, rise: 0, hold: 30s, decay: 0, after: 20s}}\n"
    )
    assert peak_from(str(scenario), window=10).rate == pytest.approx(20)
    assert peak_from(str(scenario), window=60).rate == pytest.approx((30 * 20 + 30 * 2) / 60, rel=0.05)
    for bad in ("-5", "nan", str(tmp_path / "missing.yaml")):
        with pytest.raises(PeakError):
            peak_from(bad)
