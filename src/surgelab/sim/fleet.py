"""The fleet: what serves the scenario's traffic in a simulation, as pure data.

A fleet is one or more *pools* of identical replicas (an engine profile, a plain
service-time model for queueing checks, or a latency curve: a service whose every request
takes a time set by how many it holds, seed 002's toy), a router in front of them, an optional admission
queue, a response cache, autoscaling per pool, pre-scaling, and failures. Every duration
accepts unit strings (``30s``, ``250ms``) and is stored in seconds. Nothing here holds a
clock, an RNG or state: the simulator builds its runtime objects from this.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from surgelab.scenario.distributions import Distribution
from surgelab.units import parse_duration

__all__ = [
    "Fleet", "Pool", "Router", "HealthCheck", "Autoscale", "ScalingRules", "ScalingPolicy", "ScaleToZero",
    "Forecast", "ScheduledScale", "Admission", "Cache", "Failures", "Crash", "LatencyCurve", "Region",
    "Outage",
]  # fmt: skip

Seconds = Annotated[float, BeforeValidator(parse_duration), Field(ge=0)]
PositiveSeconds = Annotated[float, BeforeValidator(parse_duration), Field(gt=0)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, validate_default=True)


class ScalingPolicy(_Model):
    """One rate limit: at most ``value`` pods (or percent of the pods) per ``period``."""

    type: Literal["Pods", "Percent"]
    value: int = Field(gt=0)
    period: PositiveSeconds = Field(15.0, description="periodSeconds: the window the limit holds over.")


class ScalingRules(_Model):
    """HPA ``behavior.scaleUp`` / ``scaleDown``: stabilisation window, rate policies, selectPolicy."""

    stabilization: Seconds | None = Field(None, description="stabilizationWindowSeconds; default 0 s up, 300 s down.")
    policies: list[ScalingPolicy] | None = Field(
        None, description="Default up: 100 % or 4 pods per 15 s; down: 100 % per 15 s."
    )
    select: Literal["Max", "Min", "Disabled"] = Field("Max", description="selectPolicy.")


class ScaleToZero(_Model):
    """KEDA-style: no traffic for ``cooldown`` scales the pool to zero; a request wakes it."""

    cooldown: Seconds = Field(300.0, description="KEDA cooldownPeriod: idle time before scaling to zero.")


class Forecast(_Model):
    """Forecast-driven pre-scaling from the scenario's planned load (a perfect forecast).

    At every sync the floor is ``ceil(peak ÷ per_replica)``, the peak being the highest rate
    planned between now and ``lead`` from now: replicas are ready when the load arrives if
    ``lead`` covers the cold start plus a sync period.
    """

    lead: Seconds = Field(60.0, description="Provision for the highest load planned within this horizon.")
    per_replica: float = Field(gt=0, description="Requests/s one replica should carry.")


class ScheduledScale(_Model):
    """At ``at``, set the pool's minimum replicas (a cron job patching minReplicas)."""

    at: Seconds
    min: int = Field(ge=0)


class Autoscale(_Model):
    """The Kubernetes HPA algorithm on one metric, per pool."""

    metric: Literal["rps", "in_flight", "queue", "busy", "p99_latency"] = Field(
        description="rps: requests/s per replica; in_flight per replica; queue: waiting requests per replica; "
        "busy: engine busy fraction (GPU utilisation, 0-1); p99_latency: P99 E2E seconds of the last period."
    )
    target: float = Field(gt=0, description="Target value of the metric (per replica for rps, in_flight, queue).")
    min: int = Field(1, ge=0, description="minReplicas (0 needs scale_to_zero).")
    max: int = Field(10, ge=1, description="maxReplicas.")
    sync_period: PositiveSeconds = Field(15.0, description="--horizontal-pod-autoscaler-sync-period.")
    tolerance: float = Field(0.1, ge=0, description="No change while |metric/target - 1| <= tolerance.")
    scale_up: ScalingRules = ScalingRules()
    scale_down: ScalingRules = ScalingRules()
    scale_to_zero: ScaleToZero | None = None
    schedule: list[ScheduledScale] = Field(default_factory=list, description="Scheduled pre-scaling.")
    forecast: Forecast | None = Field(None, description="Forecast-driven pre-scaling.")

    @model_validator(mode="after")
    def _bounds(self) -> Autoscale:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must not exceed max ({self.max})")
        if self.min == 0 and self.scale_to_zero is None:
            raise ValueError("min: 0 needs scale_to_zero (KEDA) settings")
        return self


class Crash(_Model):
    at: Seconds
    replica: int = Field(0, ge=0, description="Index of the replica in its pool.")


class Failures(_Model):
    """Replica crashes at given times or drawn with a mean time between failures; then recovery."""

    crashes: list[Crash] = Field(default_factory=list)
    mtbf: PositiveSeconds | None = Field(None, description="Mean time between failures of each replica (exponential).")
    recovery: Seconds = Field(60.0, description="From a crash until the replica starts again (then its cold start).")


class LatencyCurve(_Model):
    """A service whose every request takes a time set by how many requests it holds (seed 002's toy).

    With ``C`` the capacity (``capacity``, or ``int(gpu_memory ÷ memory_per_request)`` as the
    seed sizes it) and ``c`` the requests held when a request is admitted (itself included):
    up to ``C``, latency = max(``base_latency`` ÷ speedup(c), ``floor``), speedup(c) = log2(c + 1)
    (``speedup: log2``) or 1 (``none``); past ``C``, latency = ``base_latency`` × (1 + ``overload`` ×
    (c ÷ C − 1)²). A share of the requests fails once c exceeds ``errors_above`` × C: min(
    ``error_slope`` × (c − ``errors_above`` × C) ÷ C, ``max_error_rate``).
    """

    base_latency: PositiveSeconds = Field(description="One request alone takes this long.")
    speedup: Literal["log2", "none"] = Field(
        "log2", description="Up to capacity: log2 divides base_latency by log2(c + 1); none keeps it constant."
    )
    floor: Seconds = Field(0.0, description="No request is faster than this.")
    capacity: int | None = Field(None, ge=1, description="Requests held at full speed (or give the memory pair).")
    gpu_memory: float | None = Field(
        None, gt=0, description="Memory of the replica (GB): capacity = int(gpu_memory ÷ memory_per_request)."
    )
    memory_per_request: float | None = Field(None, gt=0, description="Memory one request holds (GB).")
    overload: float = Field(0.0, ge=0, description="Past capacity: base_latency × (1 + overload × (c/C − 1)²).")
    errors_above: float | None = Field(None, gt=0, description="Requests fail once c > this × capacity (none: never).")
    error_slope: float = Field(
        1.0, ge=0, description="Failed share per capacity-worth of requests past errors_above × C."
    )
    max_error_rate: float = Field(0.5, ge=0, le=1, description="The failed share never exceeds this.")

    @model_validator(mode="after")
    def _sized(self) -> LatencyCurve:
        memory = (self.gpu_memory, self.memory_per_request)
        if self.capacity is None and None in memory:
            raise ValueError("give capacity, or both gpu_memory and memory_per_request")
        if self.capacity is not None and memory != (None, None):
            raise ValueError("give capacity or gpu_memory with memory_per_request, not both")
        if self.capacity is None and self.slots < 1:
            raise ValueError(
                f"gpu_memory ({self.gpu_memory:g}) ÷ memory_per_request ({self.memory_per_request:g}) holds no request"
            )
        return self

    @property
    def slots(self) -> int:
        """C: requests held at full speed."""
        if self.capacity is not None:
            return self.capacity
        assert self.gpu_memory is not None and self.memory_per_request is not None
        return int(self.gpu_memory / self.memory_per_request)  # the seed's rounding: whole requests

    def latency(self, held: int) -> float:
        """Seconds a request takes when it is admitted with ``held`` requests on the replica (itself included)."""
        cap = self.slots
        if held <= cap:
            speedup = math.log2(held + 1) if self.speedup == "log2" else 1.0
            return max(self.base_latency / speedup, self.floor)
        return self.base_latency * (1 + self.overload * (held / cap - 1) ** 2)

    def error_rate(self, held: int) -> float:
        """The share of the requests admitted at ``held`` that fail."""
        if self.errors_above is None:
            return 0.0
        start = self.errors_above * self.slots
        if held <= start:
            return 0.0
        return min(self.error_slope * (held - start) / self.slots, self.max_error_rate)


class Outage(_Model):
    """The whole region is down from ``at`` for ``duration``: every replica of its pools is lost."""

    at: Seconds
    duration: PositiveSeconds


class Region(_Model):
    """Where pools run, seen from the clients: the network round trip to it, and its outages.

    Each request's round trip is ``rtt`` plus a draw uniform in ``[-jitter, +jitter]`` (fixed by
    the fleet's seed and the request's id), half on the way there and half on the way back.
    """

    name: str
    rtt: Seconds = Field(0.0, description="Network round-trip time from the clients to this region.")
    jitter: Seconds = Field(0.0, description="Each request's round trip varies uniformly within rtt ± jitter.")
    outages: list[Outage] = Field(default_factory=list, description="Times the whole region is down.")

    @model_validator(mode="after")
    def _jitter(self) -> Region:
        if self.jitter > self.rtt:
            raise ValueError(f"jitter ({self.jitter:g}s) must not exceed rtt ({self.rtt:g}s)")
        return self


class Pool(_Model):
    """Identical replicas: an engine profile, a service-time model (``service_time``) or a ``latency_curve``."""

    name: str = "default"
    replicas: int = Field(1, ge=0, description="Replicas at the start (ready at time 0).")
    profile: str | dict[str, Any] | None = Field(
        None,
        description="Engine profile: a name, a coefficients or deployment file, or a deployment written here "
        "({model: a catalogued model or a config.json, gpu: h100, tp: 2, weights: fp8, …}; docs/engine.md).",
    )
    service_time: Distribution | None = Field(None, description="Instead of an engine: each request takes this long.")
    latency_curve: LatencyCurve | None = Field(
        None, description="Instead of an engine: each request's latency set by the requests held at its admission."
    )
    per_output_token: bool = Field(
        False, description="Service model: service_time is per output token (the request's max_tokens)."
    )
    concurrency: int | None = Field(
        None,
        ge=1,
        description="Requests a replica holds at once; beyond it they wait in the fleet queue. "
        "Service model: its parallel servers (default 1); engine and latency curve: unlimited by default.",
    )
    prefix_caching: bool = Field(True, description="Engine prefix cache (needs cache.prefix for the prompt hashes).")
    coalesce: Seconds = Field(
        0.002, description="Deliver tokens of steps shorter than this together, as surgelab serve does."
    )
    cold_start: Seconds = Field(0.0, description="Model load and warm-up of a new replica before it is ready.")
    cost_per_hour: float = Field(0.0, ge=0, description="Price of one replica-hour.")
    weight: float = Field(1.0, ge=0, description="Weighted routing: this pool's share.")
    region: str | None = Field(None, description="The region (fleet `regions`) the pool runs in; none: no network delay.")
    autoscale: Autoscale | None = None
    failures: Failures = Failures()

    @model_validator(mode="after")
    def _one_model(self) -> Pool:
        if sum(x is not None for x in (self.profile, self.service_time, self.latency_curve)) != 1:
            raise ValueError("give exactly one of profile (engine), service_time (queueing model) or latency_curve")
        if self.autoscale is not None and not self.autoscale.min <= self.replicas <= self.autoscale.max:
            raise ValueError(f"replicas ({self.replicas}) must lie within autoscale min..max")
        return self


class HealthCheck(_Model):
    """Active health checks, as a live router's (``load.health``): a replica is out after ``failures`` failures of
    checks or requests, back after ``recovery`` passing checks."""

    interval: PositiveSeconds = 15.0
    failures: int = Field(3, ge=1, description="Consecutive failures (checks or requests) that take a replica out.")
    recovery: int = Field(1, ge=1, description="Consecutive passed checks that bring it back.")
    max_switch_over: PositiveSeconds | None = Field(
        None, description="The plan's bound on switch_over_s (crash → detection), e.g. 30s: judged in summary.json's "
        "failover and thresholds; the scenario's routing.health.max_switch_over when unset."
    )


class Router(_Model):
    policy: Literal["round_robin", "least_outstanding", "weighted", "failover", "nearest"] = Field(
        "least_outstanding",
        description="weighted: pools by weight; failover: first pool with a healthy replica; "
        "nearest: the lowest-rtt region with a replica up and with room, else the next.",
    )
    health_check: HealthCheck | None = Field(None, description="Without it the router knows every crash at once.")
    affinity: Literal["session"] | None = Field(
        None, description="session: a multi-turn session's requests go to the replica of its first while it is "
        "routable, as a router pinning sessions by header does (target.session_header); the policy picks the first.",
    )  # fmt: skip


class Admission(_Model):
    """The fleet's queue in front of the replicas: bounded, with a timeout, served by tier priority."""

    max_depth: int | None = Field(None, ge=0, description="Beyond this many waiting, requests are shed.")
    timeout: PositiveSeconds | None = Field(None, description="A request waiting longer is shed.")
    shed_status: Literal[429, 503] = Field(429, description="HTTP status of a shed request (recorded as http_error).")
    priority: list[str] = Field(default_factory=list, description="Tiers served first, in order (e.g. [paid, free]).")


class Cache(_Model):
    """Response cache (exact prompt match, with a TTL) and prefix reuse in the engines."""

    exact: bool = Field(False, description="Answer repeated identical requests from the cache.")
    ttl: PositiveSeconds = Field(300.0, description="How long a cached answer stays valid.")
    hit_latency: Seconds = Field(0.005, description="Time to answer from the cache.")
    prefix: bool = Field(False, description="Hash prompts into KV blocks so engines reuse shared prefixes.")
    memory_gb: float | None = Field(
        None, gt=0, description="Memory given to the response cache (GB); default: what it holds, as KV of its tokens."
    )
    min_hit_rate: float = Field(
        0.2, ge=0, le=1, description="Below this hit rate a cache whose memory would have held sequences is flagged."
    )


class Fleet(_Model):
    """Everything that serves the traffic in a simulation."""

    name: str = "fleet"
    description: str = ""
    pools: list[Pool] = Field(min_length=1)
    regions: list[Region] = Field(default_factory=list, description="Regions the pools run in (network, outages).")
    router: Router = Router()
    admission: Admission = Admission()
    cache: Cache = Cache()
    seed: int = Field(0, ge=0, description="Seeds service times and failure draws.")
    timeline_interval: PositiveSeconds = Field(1.0, description="Sampling interval of fleet.parquet.")

    @model_validator(mode="after")
    def _names(self) -> Fleet:
        names = [p.name for p in self.pools]
        if len(set(names)) != len(names):
            raise ValueError(f"pool names must be unique, got {names}")
        if self.router.policy == "weighted" and not any(p.weight > 0 for p in self.pools):
            raise ValueError("weighted routing needs a pool with weight > 0")
        regions = [r.name for r in self.regions]
        if len(set(regions)) != len(regions):
            raise ValueError(f"regions: region names must be unique, got {regions}")
        for i, pool in enumerate(self.pools):
            if pool.region is not None and pool.region not in regions:
                known = ", ".join(regions) or "none: add a `regions` list"
                raise ValueError(f"pools[{i}].region: unknown region {pool.region!r} (regions: {known})")
        if self.router.policy == "nearest" and not any(p.region for p in self.pools):
            raise ValueError("router.policy: nearest needs pools with a region (and `regions` with their rtt)")
        return self
