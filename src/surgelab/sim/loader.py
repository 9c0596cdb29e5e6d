"""Read a fleet file with errors that point at lines, as the scenario loader does."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from surgelab.engine import EngineProfile, ProfileError, load_profile
from surgelab.engine.accuracy import ErrorBar, error_bar
from surgelab.scenario.loader import ScenarioError, describe_error, field_path, line_of
from surgelab.scenario.model import Scenario
from surgelab.sim.fleet import Fleet
from surgelab.workload.context import context_warnings
from surgelab.yamlfile import read_yaml

__all__ = ["FleetError", "load_fleet", "build_fleet", "pool_profile", "fleet_error_bar", "fleet_context_warnings"]


_NAMED = re.compile(r"^([a-z_]+(?:\[\d+\]|\.[a-z_]+)*): (.+)$", re.S)
"""A cross-field problem that names its field first (``pools[1].region: unknown region``)."""


class FleetError(ScenarioError):
    """A fleet that cannot be used; ``messages`` holds one ``file:line: path: problem`` per error."""


def build_fleet(
    data: object, *, source: str = "<fleet>", root: yaml.Node | None = None, base_dir: Path | None = None
) -> Fleet:
    if not isinstance(data, dict):
        raise FleetError([f"{source}:1: expected a mapping of fleet fields at the top level"])
    try:
        fleet = Fleet.model_validate(data)
    except ValidationError as exc:
        messages = []
        for error in exc.errors():
            loc, path, problem = tuple(error["loc"]), None, describe_error(error)
            if not loc and (named := _NAMED.match(problem)):  # the fleet's own checks name the field
                path, problem = named.group(1), named.group(2)
                loc = tuple(int(p) if p.isdigit() else p for p in re.findall(r"\w+", path))
            path = path or field_path(loc, data) or "fleet"
            messages.append(f"{source}:{line_of(root, loc) or 1}: {path}: {problem}")
        raise FleetError(messages) from None
    problems = []
    for index, pool in enumerate(fleet.pools):
        if pool.profile is None:
            continue
        try:
            pool_profile(pool.profile, base_dir)
        except ProfileError as exc:
            line = line_of(root, ("pools", index, "profile")) or 1
            problems.append(f"{source}:{line}: pools[{index}].profile: {exc}")
    if problems:
        raise FleetError(problems)
    if base_dir is not None:  # profile files are relative to the fleet file, like scenario files
        pools = [p.model_copy(update={"profile": _anchored(p.profile, base_dir)}) if p.profile else p for p in fleet.pools]
        fleet = fleet.model_copy(update={"pools": pools})
    return fleet


def _anchored(spec: str | dict[str, Any], base_dir: Path) -> str | dict[str, Any]:
    """A profile file, or a deployment's config.json, made relative to the fleet file's folder."""
    if isinstance(spec, dict):
        model = spec.get("model")
        if isinstance(model, str) and (base_dir / model).exists():
            return {**spec, "model": str(base_dir / model)}
        return spec
    return str(base_dir / spec) if (base_dir / spec).is_file() else spec


def pool_profile(spec: str | dict[str, Any], base_dir: Path | None = None) -> EngineProfile:
    """A named profile, a coefficients or deployment file, or a deployment mapping (paths relative to ``base_dir``)."""
    if isinstance(spec, dict):
        return load_profile(spec, base_dir)
    if base_dir is not None and (base_dir / spec).is_file():
        return load_profile(str(base_dir / spec))
    return load_profile(spec)


def load_fleet(path: str | Path) -> Fleet:
    path = Path(path)
    data, root = read_yaml(path, "fleet file", FleetError)
    return build_fleet(data, source=str(path), root=root, base_dir=path.parent)


def fleet_error_bar(fleet: Fleet) -> ErrorBar | None:
    """The engine model's measured error for the least sure of the fleet's engine pools (None: no physics profile)."""
    bars = [bar for pool in fleet.pools if pool.profile and (bar := error_bar(pool_profile(pool.profile)))]
    return max(bars, key=lambda b: b.e2e, default=None)


def fleet_context_warnings(scenario: Scenario, fleet: Fleet) -> list[str]:
    """The scenario's classes too long for an engine pool's max_model_len (its requests would all be 400s)."""
    return [
        warning
        for pool in fleet.pools
        if pool.profile
        for warning in context_warnings(
            scenario, pool_profile(pool.profile).max_model_len, f"max_model_len of pool {pool.name} in fleet {fleet.name}"
        )
    ]
