"""Read a fleet file with errors that point at lines, as the scenario loader does."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pydantic import ValidationError

from surgelab.engine import EngineProfile, ProfileError, load_profile
from surgelab.scenario.loader import ScenarioError, describe_error, field_path, line_of
from surgelab.sim.fleet import Fleet
from surgelab.yamlfile import read_yaml

__all__ = ["FleetError", "load_fleet", "build_fleet", "pool_profile"]


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
        pools = [
            p.model_copy(update={"profile": str(base_dir / p.profile)})
            if p.profile and (base_dir / p.profile).is_file() else p
            for p in fleet.pools
        ]  # fmt: skip
        fleet = fleet.model_copy(update={"pools": pools})
    return fleet


def pool_profile(spec: str, base_dir: Path | None = None) -> EngineProfile:
    """A named profile, or a coefficients file (relative to ``base_dir`` when given)."""
    if base_dir is not None and (base_dir / spec).is_file():
        return load_profile(str(base_dir / spec))
    return load_profile(spec)


def load_fleet(path: str | Path) -> Fleet:
    path = Path(path)
    data, root = read_yaml(path, "fleet file", FleetError)
    return build_fleet(data, source=str(path), root=root, base_dir=path.parent)
