"""A deployment space to search: which GPUs, parallelism, precisions and limits, for what traffic and SLO.

A search space file names the workload (a scenario file, or a run directory whose traffic is
replayed from its own scenario and seed), the forecast peak it must hold, the objective (the
thresholds a passing fleet meets) and the choices: every combination of the listed values is
one configuration; the search finds, for each, the fewest replicas that pass.

```yaml
name: llama70b
workload: chat.yaml               # relative to this file
peak: 50                          # req/s the fleet must hold (the scenario's steady rate is set to it)
slo: ["p99(ttft) < 500ms", "p99(e2e) < 20s", "error_rate < 1%"]
model: meta-llama/Llama-3.1-70B-Instruct
gpus: {h100: 2.49, h200: 3.59, a100: 1.79}   # each GPU with its price per hour
tp: [1, 2, 4, 8]
weights: [bf16, fp8]
max_num_seqs: [64, 128, 256]
max_num_batched_tokens: [2048, 8192]
replicas: {min: 1, max: 32}
```

With ``autoscale`` the replicas may also follow an HPA: every combination of its ``metric``,
``target``, ``min`` and ``max`` is one more choice beside the fixed counts, simulated on the
workload's own load shape (a day, a flash sale), and costs its mean replicas over the run:

```yaml
autoscale:
  metric: [in_flight, rps]        # the fleet's autoscale metrics: rps, in_flight, queue, busy
  target: {in_flight: [16, 32], rps: [10, 20]}   # or one list for every metric
  min: [1, 2]
  max: 24
  cold_start: 60s                 # a new replica's model load, before it serves
  settings: {sync_period: 15s, scale_down: {stabilization: 300s}}   # the rest of the HPA, fixed
```
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

from surgelab.conditions import Threshold
from surgelab.engine.hardware import GPUS, PRECISIONS
from surgelab.engine.profiles import load_profile
from surgelab.scenario.loader import ScenarioError, describe_error, field_path, line_of
from surgelab.sim.fleet import Autoscale
from surgelab.units import parse_duration
from surgelab.yamlfile import read_yaml

__all__ = ["Candidate", "SearchSpace", "SpaceError", "load_space", "varying"]


class SpaceError(ScenarioError):
    """A search space that cannot be used; one ``file:line: field: problem`` per error."""


def _listed(value: Any) -> Any:
    return value if isinstance(value, list) else [value]


class Replicas(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    min: int = Field(1, ge=1)
    max: int = Field(64, ge=1, le=10_000)

    @model_validator(mode="after")
    def _order(self) -> Replicas:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must not exceed max ({self.max})")
        return self


class AutoscaleSpace(BaseModel):
    """HPA settings to compare: every combination of metric, target, min and max is one autoscaler."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    metric: Annotated[list[Literal["rps", "in_flight", "queue", "busy"]], BeforeValidator(_listed)] = Field(
        description="What the HPA scales on (the fleet's autoscale metrics; p99_latency has no HPA manifest)."
    )
    target: Annotated[list[float], BeforeValidator(_listed)] | dict[str, Annotated[list[float], BeforeValidator(_listed)]] = Field(
        description="Per-replica targets to compare: a list for every metric, or each metric's own list."
    )
    min: Annotated[list[int], BeforeValidator(_listed)] = [1]
    max: Annotated[list[int], BeforeValidator(_listed)] = Field(description="maxReplicas to compare.")
    cold_start: Annotated[float, BeforeValidator(parse_duration)] = Field(
        0.0, ge=0, description="A new replica's model load and warm-up before it serves."
    )
    settings: dict[str, Any] = Field(
        {}, description="The rest of the fleet's autoscale block, the same for every choice (sync_period, scale_up, …)."
    )

    @field_validator("target")
    @classmethod
    def _targets(cls, value: list[float] | dict[str, list[float]]) -> list[float] | dict[str, list[float]]:
        for targets in value.values() if isinstance(value, dict) else [value]:
            if not targets or any(not (v > 0) for v in targets):
                raise ValueError("give one or more targets > 0")
        return value

    def targets(self, metric: str) -> list[float]:
        return self.target.get(metric, []) if isinstance(self.target, dict) else self.target

    @field_validator("min", "max")
    @classmethod
    def _counts(cls, value: list[int]) -> list[int]:
        if not value or any(v < 1 for v in value):
            raise ValueError("give one or more replica counts >= 1")
        return value

    @model_validator(mode="after")
    def _hpa(self) -> AutoscaleSpace:
        if isinstance(self.target, dict) and set(self.target) != set(self.metric):
            raise ValueError(f"target: give targets for exactly the metrics {', '.join(self.metric)}")
        fixed = {"metric", "target", "min", "max"} & set(self.settings)
        if fixed:
            raise ValueError(f"settings: {', '.join(sorted(fixed))} are choices here, not settings")
        try:
            Autoscale.model_validate({**self.settings, "metric": self.metric[0], "target": self.targets(self.metric[0])[0],
                                      "min": 1, "max": 1})  # fmt: skip
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ValueError(f"settings{'.' + where if where else ''}: {first['msg']}") from None
        if min(self.min) > max(self.max):
            raise ValueError(f"no min ({min(self.min)}) at or below a max ({max(self.max)})")
        return self

    def choices(self) -> list[tuple[str, float, int, int]]:
        """(metric, target, min, max) for every combination with min <= max."""
        combos = ((m, t, low, high) for m in self.metric for t in self.targets(m) for low in self.min for high in self.max)
        return [c for c in combos if c[2] <= c[3]]


class SearchSpace(BaseModel):
    """Every field a list of choices (a single value is a list of one)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field("search", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
    workload: str = Field(description="A scenario file, or a run directory (its scenario.yaml), relative to this file.")
    peak: float | None = Field(
        None, gt=0, description="Forecast peak, req/s: the scenario's steady open-loop rate is set to it."
    )
    duration: Annotated[float, BeforeValidator(parse_duration)] | None = Field(
        None, gt=0, description="Simulated seconds at the peak (default: the scenario's own)."
    )
    slo: list[Threshold] = Field(min_length=1, description="What a passing fleet meets (threshold expressions).")
    model: Annotated[list[str], BeforeValidator(_listed)] = Field(
        [], description="Catalogued models or config.json paths."
    )
    gpus: dict[str, float] = Field({}, description="GPU name → price per GPU-hour.")
    profiles: dict[str, float] = Field(
        {},
        description="Instead of model and gpus: engine profile files (coefficients or deployments) → price per replica-hour.",
    )
    tp: Annotated[list[int], BeforeValidator(_listed)] = [1]
    weights: Annotated[list[str], BeforeValidator(_listed)] = [""]
    kv: Annotated[list[str], BeforeValidator(_listed)] = [""]
    max_num_seqs: Annotated[list[int], BeforeValidator(_listed)] = [256]
    max_num_batched_tokens: Annotated[list[int], BeforeValidator(_listed)] = [8192]
    max_model_len: int | None = Field(None, ge=1)
    router: Annotated[list[str], BeforeValidator(_listed)] = ["least_outstanding"]
    replicas: Replicas = Replicas()
    autoscale: AutoscaleSpace | None = Field(
        None, description="Autoscaled replicas (an HPA per choice) instead of the fewest fixed replicas."
    )
    seeds: int = Field(2, ge=0, le=8, description="Extra seeds each finalist is simulated with, for a robust answer.")

    @model_validator(mode="after")
    def _what(self) -> SearchSpace:
        if bool(self.profiles) == bool(self.model or self.gpus):
            raise ValueError(
                "give model and gpus (the physics of each deployment), or profiles (engine profile files), not both"
            )
        if not self.profiles and not (self.model and self.gpus):
            raise ValueError("give both model and gpus")
        return self

    @field_validator("gpus")
    @classmethod
    def _gpus(cls, value: dict[str, float]) -> dict[str, float]:
        unknown = [g for g in value if g.lower() not in GPUS]
        if unknown:
            raise ValueError(f"unknown GPU {', '.join(unknown)}: use {', '.join(GPUS)}")
        if any(not (price >= 0) for price in value.values()):
            raise ValueError("a GPU's price per hour must be a number >= 0")
        return {g.lower(): float(p) for g, p in value.items()}

    @field_validator("tp", "max_num_seqs", "max_num_batched_tokens")
    @classmethod
    def _positive(cls, value: list[int]) -> list[int]:
        if not value or any(v < 1 for v in value):
            raise ValueError("give one or more integers >= 1")
        return value

    @field_validator("weights", "kv")
    @classmethod
    def _precision(cls, value: list[str]) -> list[str]:
        bad = [v for v in value if v and v.lower() not in PRECISIONS]
        if bad:
            raise ValueError(f"unknown precision {', '.join(bad)}: use {', '.join(PRECISIONS)}")
        return [v.lower() for v in value]

    @field_validator("router")
    @classmethod
    def _router(cls, value: list[str]) -> list[str]:
        known = ("least_outstanding", "round_robin")
        bad = [v for v in value if v not in known]
        if bad:
            raise ValueError(f"router {', '.join(bad)}: a search compares {' or '.join(known)}")
        return value

    def candidates(self) -> list[Candidate]:
        """Every combination, in a stable order."""
        if self.profiles:
            files = itertools.product(
                sorted(self.profiles), self.max_num_seqs, self.max_num_batched_tokens, self.router
            )
            plain = [Candidate(f, "profile", self.profiles[f], 1, "", "", seqs, tokens, router, profile_file=f)
                     for f, seqs, tokens, router in files]  # fmt: skip
        else:
            combos = itertools.product(self.model, sorted(self.gpus), self.tp, self.weights, self.kv, self.max_num_seqs,
                                       self.max_num_batched_tokens, self.router)  # fmt: skip
            plain = [Candidate(m, g, self.gpus[g], tp, w, kv, seqs, tokens, router)
                     for m, g, tp, w, kv, seqs, tokens, router in combos]  # fmt: skip
        if self.autoscale is None:
            return plain
        settings = json.dumps(self.autoscale.settings, sort_keys=True, default=str)
        scaled = [replace(c, autoscale=choice, cold_start=self.autoscale.cold_start, hpa_settings=settings)
                  for c in plain for choice in self.autoscale.choices()]  # fmt: skip
        return plain + scaled  # a fixed count stays a choice: the HPA must beat it to win


@dataclass(frozen=True)
class Candidate:
    """One configuration of the space: a replica's deployment and the router in front of the replicas."""

    model: str
    gpu: str
    gpu_hour: float
    tp: int
    weights: str
    kv: str
    max_num_seqs: int
    max_num_batched_tokens: int
    router: str
    profile_file: str = ""
    """An engine profile file instead of a deployment (``gpu_hour`` is then the replica's price)."""
    autoscale: tuple[str, float, int, int] | None = None
    """The HPA's (metric, target, min, max); None: a fixed replica count, searched."""
    cold_start: float = 0.0
    hpa_settings: str = ""
    """The rest of the HPA (JSON), the same for every choice."""

    def hpa(self) -> dict[str, Any] | None:
        """The fleet pool's ``autoscale`` block, or None for a fixed count."""
        if self.autoscale is None:
            return None
        metric, target, low, high = self.autoscale
        return {**json.loads(self.hpa_settings or "{}"), "metric": metric, "target": target, "min": low, "max": high}

    @property
    def replica_hour(self) -> float:
        return self.gpu_hour * self.tp

    def deployment(self, max_model_len: int | None = None, base: Path | None = None) -> dict[str, Any]:
        """What a fleet pool's ``profile`` takes: an inline deployment, or a profile file's coefficients with these limits."""
        if self.profile_file:
            coefficients = load_profile(self.profile_file, base).to_dict()
            coefficients.update(max_num_seqs=self.max_num_seqs, max_batched_tokens=self.max_num_batched_tokens)
            return coefficients
        out: dict[str, Any] = {"model": self.model, "gpu": self.gpu, "tp": self.tp, "max_num_seqs": self.max_num_seqs,
                               "max_num_batched_tokens": self.max_num_batched_tokens}  # fmt: skip
        if self.weights:
            out["weights"] = self.weights
        if self.kv:
            out["kv"] = self.kv
        if max_model_len:
            out["max_model_len"] = max_model_len
        return out

    def parts(self) -> dict[str, str]:
        """The label's pieces by the choice they show."""
        if self.profile_file:
            out = {"profile": Path(self.profile_file).stem}
        else:
            kv = "/" + self.kv + " KV" if self.kv else ""
            out = {"model": self.model.rsplit("/", 1)[-1], "gpu": f"{self.tp}×{self.gpu}",
                   "precision": f"{self.weights or 'ckpt'}{kv}"}  # fmt: skip
        out.update(seqs=f"seqs {self.max_num_seqs}", tokens=f"tokens {self.max_num_batched_tokens}", router=self.router)
        if self.autoscale is not None:
            metric, target, low, high = self.autoscale
            out["hpa"] = f"HPA {metric} {target:g} {low}–{high}"
        return out

    def label(self, shown: set[str] | None = None) -> str:
        """Every choice (the configuration's name in search.json), or only the ``shown`` ones."""
        return " ".join(v for k, v in self.parts().items() if shown is None or k in shown)


def varying(candidates: list[Candidate]) -> set[str]:
    """The label pieces that differ between configurations: what a short label must show."""
    values: dict[str, set[str]] = {}
    for c in candidates:
        for k, v in {"hpa": "fixed", **c.parts()}.items():
            values.setdefault(k, set()).add(v)
    return {k for k, v in values.items() if len(v) > 1} or {"gpu"}


def load_space(path: Path) -> tuple[SearchSpace, Path]:
    """The space in ``path`` and the folder its relative paths start from; SpaceError with file:line otherwise."""
    data, root = read_yaml(path, "search space", SpaceError)
    if not isinstance(data, dict):
        raise SpaceError([f"{path}:1: expected a mapping of search fields at the top level"])
    try:
        space = SearchSpace.model_validate(data)
    except ValidationError as exc:
        messages = []
        for error in exc.errors():
            loc = tuple(error["loc"])
            messages.append(
                f"{path}:{line_of(root, loc) or 1}: {field_path(loc, data) or 'space'}: {describe_error(error)}"
            )
        raise SpaceError(messages) from None
    base = path.parent.resolve()
    # paths (config.json files, profile files) are relative to the space file, as a fleet file's are
    models = [str(base / m) if (base / m).exists() else m for m in space.model]
    profiles = {str(base / f) if (base / f).exists() else f: c for f, c in space.profiles.items()}
    return space.model_copy(update={"model": models, "profiles": profiles}), base
