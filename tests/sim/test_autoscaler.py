"""The HPA algorithm against the worked examples of the Kubernetes documentation.

Source: kubernetes.io/docs/concepts/workloads/autoscaling/horizontal-pod-autoscale/
("Algorithm details", "Stabilization window", "Scaling policies", "Default behavior").
"""

from __future__ import annotations

from surgelab.sim.autoscaler import Hpa
from surgelab.sim.fleet import Autoscale


def hpa(**fields) -> Hpa:
    fields.setdefault("metric", "busy")
    fields.setdefault("target", 100.0)
    fields.setdefault("min", 1)
    fields.setdefault("max", 1000)
    return Hpa(Autoscale(**fields))


def test_double_and_halve():
    """'if the current metric value is 200m, and the desired value is 100m, the number of
    replicas will be doubled ... If the current value is instead 50m, you'll halve'."""
    h = hpa()
    assert h.recommend(4, [200.0] * 4, 0) == 8
    assert h.recommend(4, [50.0] * 4, 0) == 2


def test_tolerance_skips_small_changes():
    h = hpa()
    assert h.recommend(10, [109.0] * 10, 0) == 10  # ratio 1.09: within 0.1
    assert h.recommend(10, [91.0] * 10, 0) == 10
    assert h.recommend(10, [111.0] * 10, 0) == 12  # ceil(1.11 × 10)


def test_configurable_tolerance_blog_example():
    """v1.33 blog: 50 replicas at 90 % against a 75 % target → 60."""
    h = hpa(target=75.0)
    assert h.recommend(50, [90.0] * 50, 0) == 60


def test_not_ready_pods_count_as_zero_when_scaling_up():
    h = hpa()
    # 2 ready at 150 %, 2 not ready: (300 / 4) / 100 = 0.75 → reverses direction: no change
    assert h.recommend(4, [150.0, 150.0], 2) == 4
    # 2 ready at 300 %, 1 not ready: 600 / 3 = 200 % → ceil(2 × 3) = 6
    assert h.recommend(3, [300.0, 300.0], 1) == 6
    # scaling down: not-ready pods are left out
    assert h.recommend(4, [40.0, 40.0], 2) == 1


def test_scale_down_stabilization_is_a_rolling_maximum():
    h = hpa()  # default scale-down window 300 s
    assert h.decide(0, 10, 10) == 10
    assert h.decide(15, 10, 4) == 10  # 10 was recommended within the last 300 s
    assert h.decide(200, 10, 6) == 10
    assert h.decide(301, 10, 5) == 6  # the 10 at t=0 has left the window; max(4, 6, 5) = 6
    assert h.decide(516, 6, 5) == 5


def test_default_scale_up_policy_100_percent_or_4_pods_per_15s():
    h = hpa()
    assert h.decide(0, 2, 20) == 6  # max(2 + 4, 2 × 2)
    assert h.decide(15, 6, 20) == 12  # a new period: max(6 + 4, 6 × 2)
    h = hpa()
    assert h.decide(0, 1, 3) == 3  # within both limits


def test_scale_down_policies_docs_example():
    """Pods 4 / 60 s and Percent 10 / 60 s, selectPolicy Max: 80 replicas lose 8 in the first
    step; at 72, '10% of the pods is 7.2 but the number is rounded up to 8'."""
    policies = [{"type": "Pods", "value": 4, "period": 60}, {"type": "Percent", "value": 10, "period": 60}]
    h = hpa(scale_down={"stabilization": 0, "policies": policies})
    assert h.decide(0, 80, 10) == 72
    assert h.decide(15, 72, 10) == 72  # the period's budget is spent
    assert h.decide(61, 72, 10) == 64
    h = hpa(scale_down={"stabilization": 0, "policies": policies, "select": "Min"})
    assert h.decide(0, 80, 10) == 76  # the policy allowing the smallest change
    h = hpa(scale_down={"stabilization": 0, "select": "Disabled"})
    assert h.decide(0, 80, 10) == 80


def test_min_and_max_bound_the_result():
    h = hpa(min=3, max=5)
    assert h.decide(0, 4, 9) == 5
    h = hpa(min=3, max=5, scale_down={"stabilization": 0})
    assert h.decide(0, 4, 1) == 3
    assert h.decide(15, 2, 2) == 3  # below min: straight to min
