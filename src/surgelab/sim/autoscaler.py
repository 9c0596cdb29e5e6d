"""The Kubernetes HorizontalPodAutoscaler algorithm, as documented, on simulated metrics.

Sources: "Horizontal Pod Autoscaling", kubernetes.io/docs/concepts/workloads/autoscaling/
horizontal-pod-autoscale/ (algorithm details, stabilisation window, scaling policies,
default behaviour) and the ``HPAScalingRules`` API reference (defaults).

Per sync period (15 s by default):

1. ``ratio = metric ÷ target`` over the *ready* replicas. Within ``tolerance`` (0.1) of 1,
   the recommendation is the current count. Otherwise ``ceil(ratio × ready)``.
2. Scaling up with replicas not yet ready: they count as 0 % of the target and the ratio
   is computed again over all of them; if that reverses the direction or falls within the
   tolerance, nothing changes, else ``ceil(new ratio × (ready + not ready))``.
3. Stabilisation: recommendations are kept with their times; the scale-down window takes
   the *maximum* of the recommendations within it (default 300 s), the scale-up window the
   *minimum* (default 0 s: the latest).
4. Rate policies: each allows at most ``value`` pods (``Pods``) or percent (``Percent``)
   more (fewer) than the count at the start of its ``period``; ``selectPolicy: Max`` takes
   the policy allowing the largest change, ``Min`` the smallest, ``Disabled`` forbids the
   direction. Defaults: up ``max(100 %, 4 pods) per 15 s``, down ``100 % per 15 s``.
5. The result is kept within ``min``..``max``; below ``min`` the count goes to ``min`` at
   once (the controller's first rule).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from surgelab.sim.fleet import Autoscale, ScalingPolicy, ScalingRules

__all__ = ["Hpa", "Decision"]

DEFAULT_UP = [ScalingPolicy(type="Percent", value=100, period=15), ScalingPolicy(type="Pods", value=4, period=15)]
DEFAULT_DOWN = [ScalingPolicy(type="Percent", value=100, period=15)]


@dataclass(frozen=True)
class Decision:
    time_s: float
    metric: float | None
    current: int
    recommended: int
    desired: int


class Hpa:
    """State of one autoscaler: its recommendations and its scale events, in seconds."""

    def __init__(self, cfg: Autoscale) -> None:
        self.cfg = cfg
        self.up_window = cfg.scale_up.stabilization if cfg.scale_up.stabilization is not None else 0.0
        self.down_window = cfg.scale_down.stabilization if cfg.scale_down.stabilization is not None else 300.0
        self._recommendations: deque[tuple[float, int]] = deque()
        self._events: deque[tuple[float, int]] = deque()  # (time, replicas added (+) or removed (-))

    def recommend(self, current: int, ready_values: list[float], not_ready: int, per_pod: bool = True) -> int:
        """Step 1-2: the raw recommendation from the metric of each ready replica.

        ``per_pod`` False: ``ready_values`` holds one value for the whole pool (an object
        metric such as P99 latency), scaled by the ready count without the not-ready rule.
        """
        ready = len(ready_values) if per_pod else max(current - not_ready, 0)
        if ready == 0 or not ready_values:
            return current
        tol, target = self.cfg.tolerance, self.cfg.target
        ratio = (sum(ready_values) / len(ready_values)) / target
        if per_pod and ratio > 1.0 and not_ready:
            new_ratio = sum(ready_values) / (len(ready_values) + not_ready) / target
            if new_ratio <= 1.0 + tol:
                return current
            return math.ceil(new_ratio * (len(ready_values) + not_ready))
        if abs(ratio - 1.0) <= tol:
            return current
        return math.ceil(ratio * ready)

    def decide(self, now_s: float, current: int, recommended: int, min_replicas: int | None = None) -> int:
        """Steps 3-5: stabilise, limit the rate, clamp; record the scale event it implies."""
        cfg = self.cfg
        floor = cfg.min if min_replicas is None else min_replicas
        self._recommendations.append((now_s, recommended))
        horizon = max(self.up_window, self.down_window)
        while self._recommendations and self._recommendations[0][0] < now_s - horizon:
            self._recommendations.popleft()
        ups = [r for t, r in self._recommendations if t >= now_s - self.up_window]
        downs = [r for t, r in self._recommendations if t >= now_s - self.down_window]
        stabilized = current
        if stabilized < min(ups):
            stabilized = min(ups)
        if stabilized > max(downs):
            stabilized = max(downs)
        desired = stabilized
        if desired > current:
            desired = min(desired, self._limit(now_s, current, cfg.scale_up, up=True))
        elif desired < current:
            desired = max(desired, self._limit(now_s, current, cfg.scale_down, up=False))
        desired = min(max(desired, floor), cfg.max)
        if current < floor:
            desired = floor
        if desired != current:
            self._events.append((now_s, desired - current))
        return desired

    def _limit(self, now_s: float, current: int, rules: ScalingRules, up: bool) -> int:
        if rules.select == "Disabled":
            return current
        policies = rules.policies or (DEFAULT_UP if up else DEFAULT_DOWN)
        proposals = []
        for policy in policies:
            changed = sum(d for t, d in self._events if t > now_s - policy.period and (d > 0) == up)
            start = current - changed  # the count at the start of the policy's period
            if policy.type == "Pods":
                proposals.append(start + policy.value if up else start - policy.value)
            elif up:
                proposals.append(math.ceil(start * (1 + policy.value / 100)))
            else:
                proposals.append(int(start * (1 - policy.value / 100)))
        pick = max if (rules.select == "Max") == up else min
        return pick(proposals)

    def forget_before(self, now_s: float) -> None:
        longest = max([p.period for r in (self.cfg.scale_up, self.cfg.scale_down) for p in (r.policies or [])] + [60.0])
        while self._events and self._events[0][0] < now_s - longest:
            self._events.popleft()
