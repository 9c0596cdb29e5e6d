"""Load a scenario from YAML (plus command-line overrides) with errors that point at lines.

Every validation error is reported at once, each as ``file:line: field.path: what was
expected``, so a user fixes the file in one pass instead of one error per run.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from surgelab.redact import redact_text
from surgelab.scenario.base import NO_ECHO
from surgelab.scenario.model import GuardExceeded, Scenario
from surgelab.yamlfile import read_yaml

__all__ = ["ScenarioError", "load_scenario", "build_scenario", "set_dotted", "describe_error", "field_path", "line_of"]


class ScenarioError(Exception):
    """A scenario that cannot be used; ``messages`` holds one line per problem."""

    def __init__(self, messages: list[str]) -> None:
        self.messages = messages
        super().__init__("\n".join(messages))


def set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``data['a']['b'] = value`` for ``'a.b'``, creating mappings on the way; a number picks an
    entry of a list (``phases.1.load.duration``). ValueError for an index the list does not have."""
    *parents, leaf = dotted.split(".")
    node: Any = data
    for depth, key in enumerate(parents):
        if isinstance(node, list):
            index = _index(node, key, parents[:depth])
            if not isinstance(node[index], (dict, list)):
                node[index] = {}
            node = node[index]
            continue
        child = node.get(key)
        if not isinstance(child, (dict, list)):
            child = node[key] = {}
        node = child
    if isinstance(node, list):
        node[_index(node, leaf, parents)] = value
    else:
        node[leaf] = value


def _index(items: list[Any], key: str, path: list[str]) -> int:
    if key.isdigit() and int(key) < len(items):
        return int(key)
    where = ".".join(path)
    if not items:
        raise ValueError(f"{where} is an empty list: nothing to set in it")
    raise ValueError(f"{where} is a list of {len(items)}: give an index from 0 to {len(items) - 1} after it")


def _phased_load_flags(data: dict[str, Any], source: str, overrides: Mapping[str, tuple[str, Any]]) -> list[str]:
    """Flags that set the top-level ``load`` of a scenario that has phases instead (``--duration``, ``--rate``)."""
    if data.get("load") is not None or not isinstance(data.get("phases"), list):
        return []
    names = ", ".join(f"{k} = {p.get('name')}" for k, p in enumerate(data["phases"][:6]) if isinstance(p, dict))
    names += ", …" if len(data["phases"]) > 6 else ""
    found: dict[str, str] = {}
    for dotted, (flag, value) in overrides.items():
        if dotted.startswith("load.") and value is not None:
            leaf = dotted.removeprefix("load.")
            found.setdefault(flag, f"{flag}: {source} has phases, each with its own load, so there is no load.{leaf} "
                                   f"to set: set a phase's with --set phases.N.load.{leaf}=VALUE (N: {names})")  # fmt: skip
    return list(found.values())


def line_of(root: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """1-based line of the deepest YAML node that ``loc`` reaches."""
    node, line = root, (root.start_mark.line + 1 if root is not None else None)
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next((v for k, v in node.value if getattr(k, "value", None) == part), None)
            if match is None:
                continue  # a union tag or a model name in the location: skip it
            node = match
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            continue
        line = node.start_mark.line + 1
    return line


def describe_error(error: Mapping[str, Any]) -> str:
    """A pydantic error as a user reads it: what was expected, and what was given when it helps."""
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = "unknown field (check its spelling; `surgelab schema` lists every field)"
    elif error["type"] == "missing":
        message = "required field is missing"
    given = error.get("input")
    if (
        error["type"] not in ("missing", "extra_forbidden", NO_ECHO)
        and isinstance(given, (str, int, float))
        and repr(given) not in message
    ):
        message += f" (got {given!r})"
    return message


def field_path(loc: tuple[Any, ...], data: Any) -> str:
    """Dotted path of the fields in ``loc`` as the user wrote them.

    Pydantic's location also names union members (``steady``, ``uniform``) and the fields of
    a shorthand's expansion (a bare ``rate: 5`` becomes ``{type: steady, level: 5}``); the
    path stops where the user's data does.
    """
    text, node, tag_seen = "", data, False
    for depth, part in enumerate(loc):
        if isinstance(part, int):
            text += f"[{part}]"
            node = node[part] if isinstance(node, list) and part < len(node) else None
            tag_seen = False
            continue
        # A union member's tag comes once, first, and may equal a field name (``stages``, ``step``).
        if "[" in part or (isinstance(node, dict) and not tag_seen and part in (node.get("dist"), node.get("type"))):
            tag_seen = True
            continue
        if depth and node is not None and not isinstance(node, (dict, list)):
            break  # inside the expansion of a shorthand scalar
        text += f".{part}" if text else part
        node = node.get(part) if isinstance(node, dict) else None
        tag_seen = False
    return text


def build_scenario(
    data: Any,
    *,
    source: str = "<scenario>",
    root: yaml.Node | None = None,
    overrides: Mapping[str, tuple[str, Any]] | None = None,
    base_dir: Path | None = None,
) -> Scenario:
    """Validate raw data after applying ``overrides`` ({dotted.path: (flag, value)})."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ScenarioError([f"{source}:1: expected a mapping of scenario fields at the top level"])
    problems = _phased_load_flags(data, source, overrides or {})
    if problems:
        raise ScenarioError(problems)
    flags: dict[tuple[str | int, ...], str] = {}
    for dotted, (flag, value) in (overrides or {}).items():
        try:
            set_dotted(data, dotted, value)
        except ValueError as exc:
            raise ScenarioError([f"{flag}: {exc}"]) from None
        flags[tuple(int(p) if p.isdigit() else p for p in dotted.split("."))] = flag
    try:
        return Scenario.model_validate(data, context={"base_dir": base_dir})
    except ValidationError as exc:
        messages = []
        for error in exc.errors():
            loc = tuple(error["loc"])
            path = field_path(loc, data)
            blamed = next((f for p, f in flags.items() if loc[: len(p)] == p), None)
            cause = (error.get("ctx") or {}).get("error")
            if isinstance(cause, GuardExceeded):  # raised for the whole scenario: blame what set the value
                paths = [tuple(f.split(".")) for f in cause.fields]
                given = [f for p, f in flags.items() if any(p[: len(q)] == q or q[: len(p)] == p for q in paths)]
                blamed = ", ".join(dict.fromkeys(given)) or None
                loc = paths[0] if paths else loc
            where = blamed if blamed else f"{source}:{line_of(root, loc) or 1}"
            messages.append(redact_text(f"{where}: {path or 'scenario'}: {describe_error(error)}"))
        raise ScenarioError(messages) from None


def load_scenario(
    path: str | Path | None,
    overrides: Mapping[str, tuple[str, Any]] | None = None,
) -> Scenario:
    """Read ``path`` (or start empty when None) and validate it with ``overrides`` applied."""
    if path is None:
        return build_scenario({}, source="command line", overrides=overrides)
    path = Path(path)
    data, root = read_yaml(path, "scenario file", ScenarioError)
    return build_scenario(data, source=str(path), root=root, overrides=overrides, base_dir=path.parent)
