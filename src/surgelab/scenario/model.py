"""The scenario schema: what to hit, how hard, with what, and what counts as passing.

Config is pure data: no clocks, RNGs or connections live here (they belong to the runner).
Every duration accepts unit strings (``30s``, ``250ms``) and is stored in seconds. Each section
has its module (target, load, workload, slo, output, guards; shapes and distributions); this
one holds the whole scenario and its phases, and names every section's models.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from surgelab.conditions import Threshold
from surgelab.files import scenario_path
from surgelab.scenario.base import ScenarioModel, Seconds
from surgelab.scenario.calibration import TokenizerCalibration
from surgelab.scenario.guards import Abort, Guards
from surgelab.scenario.load import Arrival, Load
from surgelab.scenario.output import Output, Telemetry, TelemetrySource
from surgelab.scenario.slo import Slo, Tier, Validity
from surgelab.scenario.target import Backoff, Health, NamedTarget, Price, Retry, Routing, Target, Timeouts, inherited
from surgelab.scenario.workload import (
    Audio,
    Dataset,
    Documents,
    HttpTemplate,
    Images,
    Kind,
    KindSettings,
    RequestClass,
    Session,
    SharedPrefix,
    Workload,
)

__all__ = [
    "Scenario", "Target", "Timeouts", "Load", "Workload", "RequestClass", "SharedPrefix", "Session", "Dataset", "Slo", "Tier",
    "Phase", "Validity", "Output", "Telemetry", "TelemetrySource", "NamedTarget", "Price", "Health", "Routing",
    "Retry", "Backoff", "Guards", "Abort", "Arrival", "Kind", "KindSettings", "Images", "Audio", "Documents",
    "HttpTemplate", "GuardExceeded", "slug",
]  # fmt: skip


_SLUG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def slug(text: str) -> str:
    """``text`` made a scenario name: every run of other characters one '-', trimmed ('../x y' → 'x-y')."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).lstrip("._-")[:128].rstrip("._-") or "run"


def _valid_target(data: dict[str, Any], info: ValidationInfo) -> bool:
    try:
        Target.model_validate(data, context=info.context)
    except ValueError:
        return False
    return True


class GuardExceeded(ValueError):
    """A scenario above a cap; ``fields`` are the dotted paths that set what is too high, so the error
    can name the flag that gave them (``--rate``) rather than a line of the file."""

    def __init__(self, message: str, fields: list[str]) -> None:
        super().__init__(message)
        self.fields = fields


class Phase(ScenarioModel):
    """A part of the scenario with its own load and mix, starting at an offset (k6's startTime)."""

    name: str = Field(description="Reported per phase in the summary.")
    start: Seconds = Field(0.0, description="Offset from the start of the run.")
    jitter: Seconds = Field(0.0, description="A random extra delay in [0, jitter) so phases do not fire in the same second.")
    load: Load
    workload: Workload | None = Field(None, description="This phase's mix; the scenario's workload when absent.")


class Scenario(ScenarioModel):
    """A complete, reproducible test: the resolved form is saved in every run directory."""

    name: str = Field(
        "run", description="Names the run and its default directory, so a slug: letters, digits, '.', '_' and '-', "
        "starting with a letter or digit, at most 128 characters.",
    )  # fmt: skip
    description: str = Field("", description="Free text for people reading the scenario.")
    seed: int = Field(0, ge=0, description="Fixes the arrival schedule and the workload: same seed, same requests.")
    prompt_salt: int | None = Field(
        None, ge=0,
        description="Mixed into every unique prompt prefix. Unset: a fresh one per run (saved in the run's "
        "scenario.yaml), so a rerun against a warm server cannot hit its prefix cache; set it to resend a run's exact prompts.",
    )  # fmt: skip
    target: Target = Field(
        description="The endpoint under test. With targets: the settings every entry inherits unless it sets its own "
        "(timeouts, headers, retry, … key by key), and the first entry when not given."
    )
    targets: list[NamedTarget] | None = Field(
        None, min_length=2, description="Several endpoints (see routing), each with target's settings it does not set itself."
    )
    routing: Routing = Field(Routing(), description="With targets: compare them, or route traffic between them.")
    load: Load | None = Field(None, description="How hard: open-loop rate or closed-loop users, duration, warm-up.")
    phases: list[Phase] | None = Field(None, min_length=1, description="Instead of load: several phases, each with its own load and mix.")
    workload: Workload = Field(Workload(), description="What each request asks for.")
    tokenizer: str = Field(
        "auto",
        description="How prompt lengths are counted. auto: the target's own tokenizer, chat template included, "
        "learned from its /tokenize (vLLM, SGLang, llama.cpp, surgelab serve) before the run, else builtin; server: the "
        "same, and an error when the target cannot tokenize; builtin; or a Hugging Face tokenizer.json (or a folder "
        "with one), a relative path being relative to the scenario file.",
    )
    tokenizer_calibration: TokenizerCalibration | None = Field(
        None, description="Filled in by surgelab when it learned the target's tokenizer (tokenizer: auto or server)."
    )
    preflight: bool = Field(
        True,
        description="Before any load, list the target's /models (picking the only model when none is given) and send "
        "one real request; a target that does not answer stops the run within seconds with its message "
        "(surgelab run --no-preflight skips it).",
    )
    slo: Slo = Field(Slo(), description="Per-request objectives that define goodput.")
    telemetry: Telemetry = Field(Telemetry(), description="Prometheus endpoints to scrape during the run.")
    tiers: dict[str, Tier] = Field(default_factory=dict, description="Named tiers with their own SLOs, referred to by request classes.")
    kinds: dict[Kind, KindSettings] = Field(
        default_factory=dict, description="Per-kind settings, e.g. {transcription: {slo: {e2e: 3s}}} (docs/kinds.md)."
    )
    thresholds: list[Threshold] = Field(default_factory=list, description="Pass/fail criteria (see below).")
    validity: Validity = Field(Validity(), description="When the run's own numbers cannot be trusted.")
    output: Output = Field(Output(), description="Where and how often results are written.")
    guards: Guards = Field(Guards(), description="Caps on rate, users and duration, and conditions that abort the run.")
    _preflight_done: bool = PrivateAttr(False)

    @property
    def preflight_done(self) -> bool:
        """Whether this scenario's targets passed their pre-flight (or it skips it) in this process."""
        return self._preflight_done

    def mark_preflight_done(self) -> Scenario:
        """A copy that is not checked again (``runner/preflight.py``); never saved with the scenario."""
        done = self.model_copy()
        done._preflight_done = True
        return done

    @field_validator("name")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not _SLUG.fullmatch(value):
            raise ValueError(
                "expected a slug (letters, digits, '.', '_' and '-', starting with a letter or digit, at most 128 "
                f"characters): it names the run directory; e.g. {slug(value)!r}"
            )
        return value

    @field_validator("tokenizer")
    @classmethod
    def _tokenizer_path(cls, value: str, info: ValidationInfo) -> str:
        return value if value in ("auto", "builtin", "server") else scenario_path(value, info, "tokenizer")

    @model_validator(mode="before")
    @classmethod
    def _primary_target(cls, data: Any, info: ValidationInfo) -> Any:
        """With ``targets`` and no ``target``, the first named target is the primary one; with both,
        every setting of ``target`` reaches every entry of ``targets`` that does not set it itself
        (a ``target`` that is itself wrong is reported once, at its own lines, and passed on to none)."""
        if not isinstance(data, dict) or not isinstance(data.get("targets"), list) or not data["targets"]:
            return data
        if "target" not in data:
            first = data["targets"][0]
            if isinstance(first, dict):
                data = {**data, "target": {k: v for k, v in first.items() if k not in ("name", "weight", "price")}}
        elif isinstance(data["target"], dict) and _valid_target(data["target"], info):
            defaults = {k: v for k, v in data["target"].items() if v is not None}
            targets = [inherited(defaults, t) if isinstance(t, dict) else t for t in data["targets"]]
            data = {**data, "targets": targets}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        if (self.load is None) == (self.phases is None):
            raise ValueError("give exactly one of load (a single phase) or phases")
        names = [p.name for p in self.phase_list]
        if len(set(names)) != len(names):
            raise ValueError(f"phase names must be unique, got {names}")
        if self.targets:
            target_names = [t.name for t in self.targets]
            if len(set(target_names)) != len(target_names):
                raise ValueError(f"target names must be unique, got {target_names}")
            if self.routing.mode == "route" and not any(t.weight > 0 for t in self.targets):
                raise ValueError("route mode needs at least one target with a weight above 0")
        for phase in self.phase_list:
            for c in (phase.workload or self.workload).classes:
                if c.tier != "default" and c.tier not in self.tiers:
                    raise ValueError(f"request class {c.name!r} names tier {c.tier!r}, which is not in tiers")
        if not self.preflight and not all(t.model for t in [self.target, *(self.targets or [])]):
            raise ValueError("target.model: give the model name (without the pre-flight it is not looked up)")
        self._within_guards()
        return self

    def _within_guards(self) -> None:
        guards = self.guards
        if guards.unlimited:
            return
        phases = self.phase_list
        where = "load" if self.load is not None else "phases"
        rate = sum(p.load.shape.peak for p in phases if p.load.mode == "open")
        users = sum(p.load.shape.peak for p in phases if p.load.mode == "closed")
        problems, fields = [], []
        if rate > guards.max_rate:
            problems.append(f"{where}: a peak of {rate:g} req/s is above guards.max_rate ({guards.max_rate:g})")
            fields.append(f"{where}.rate" if self.load is not None else where)
        if users > guards.max_concurrency:
            problems.append(f"{where}: {users:g} users is above guards.max_concurrency ({guards.max_concurrency})")
            fields.append(f"{where}.concurrency" if self.load is not None else where)
        if self.planned_duration > guards.max_duration:
            problems.append(f"{where}: {self.planned_duration:g}s is longer than guards.max_duration ({guards.max_duration:g}s)")
            fields.append(f"{where}.duration" if self.load is not None else where)
        if problems:
            raise GuardExceeded(
                "; ".join(problems) + " — raise the guard in the scenario's guards section, or pass --i-know-what-i-am-doing",
                fields,
            )

    @property
    def phase_list(self) -> list[Phase]:
        """The phases to run; a scenario with a single ``load`` is one phase named ``main``."""
        if self.phases:
            return list(self.phases)
        assert self.load is not None
        return [Phase(name="main", load=self.load)]

    def workload_of(self, phase: Phase) -> Workload:
        return phase.workload or self.workload

    def slo_of_kind(self, kind: str) -> Slo:
        """A kind's objectives, each unset one falling back to the scenario's."""
        own = self.kinds.get(kind)
        if own is None:
            return self.slo
        merged = {k: v if v is not None else getattr(self.slo, k) for k, v in own.slo.model_dump().items()}
        return Slo(**merged)

    def slo_of(self, tier: str) -> Slo:
        """A tier's objectives, each unset one falling back to the scenario's."""
        own = self.tiers.get(tier)
        if own is None:
            return self.slo
        merged = {k: v if v is not None else getattr(self.slo, k) for k, v in own.slo.model_dump().items()}
        return Slo(**merged)

    @property
    def planned_duration(self) -> float:
        """Until the last phase ends (jitter included at its maximum)."""
        return max(p.start + p.jitter + p.load.planned_duration for p in self.phase_list)
