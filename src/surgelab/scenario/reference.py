"""The scenario reference in Markdown, generated from the pydantic models so it cannot drift.

``docs/scenario.md`` is this output; a test fails when the two differ
(regenerate with ``surgelab schema --markdown > docs/scenario.md``).
"""

from __future__ import annotations

import enum
import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from surgelab.conditions import Threshold
from surgelab.scenario.distributions import Fixed
from surgelab.scenario.model import Scenario
from surgelab.scenario.shapes import SHAPES

__all__ = ["markdown"]

_INTRO = """# Scenario reference

A scenario is a YAML file validated by `surgelab validate FILE`; `surgelab schema` prints
its JSON Schema for editors. Durations accept `250ms`, `30s`, `2m`, `1h30m` or a number of
seconds. A *distribution* is a bare number (fixed) or one of
`{dist: uniform, min, max}`, `{dist: normal, mean, std, min?, max?}` (clipped),
`{dist: lognormal, mean, std, max?}` (mean and std of the values themselves) and
`{dist: exponential, mean}`. Every field can also be set on the command line of
`surgelab run` (see `surgelab run --help`), any of them with `--set path=value` (the value read
as YAML), where a number picks an entry of a list (`--set phases.1.load.duration=30s`: a phased
scenario has no top-level `load` for `--duration` or `--rate` to set). A key is given once per
mapping: a second `rate:` in `load` is an error naming both lines, not a silent override (a
`<<: *anchor` merge may be overridden, as YAML means it).

This page is generated from the models in `src/surgelab/scenario/` (one module per section).
"""


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        args = typing.get_args(annotation)
        metadata = " ".join(str(m) for m in args[1:])
        if "parse_duration" in metadata:
            return "duration"
        if "discriminator='dist'" in metadata:
            return "distribution"
        if "discriminator='type'" in metadata:
            return "number \\| shape"
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        names = [_type_name(a) for a in typing.get_args(annotation) if a is not type(None)]
        nullable = type(None) in typing.get_args(annotation)
        return " \\| ".join(names) + (" (optional)" if nullable else "")
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in typing.get_args(annotation))
    if origin in (list, dict):
        inner = ", ".join(_type_name(a) for a in typing.get_args(annotation))
        return f"{origin.__name__}[{inner}]"
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return "mapping"
        if issubclass(annotation, enum.Enum):
            return " \\| ".join(f"`{m.value}`" for m in annotation)
        return {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(
            annotation.__name__, annotation.__name__
        )
    return str(annotation).replace("typing.", "")


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """Models reachable through Optional, list and dict annotations (not through unions of shapes)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if typing.get_origin(annotation) is typing.Annotated:
        return []
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found += _models_in(arg)
    return found


def _special_kind(field: FieldInfo) -> str | None:
    """Durations and distributions are named as such rather than by their Python types."""
    discriminators = {field.discriminator, *(getattr(m, "discriminator", None) for m in field.metadata)}
    if "dist" in discriminators:
        return "distribution"
    if "type" in discriminators:
        return "number \\| shape" + (" (optional)" if "None" in str(field.annotation) else "")
    funcs = [getattr(m, "func", None) for m in field.metadata]
    if any(getattr(f, "__name__", "") == "parse_duration" for f in funcs):
        return "duration" + (" (optional)" if "None" in str(field.annotation) else "")
    return None


def _default(field: FieldInfo) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "required"
    if field.default_factory is not None:
        value = field.get_default(call_default_factory=True)
        return "`{}`" if value == {} else "`[]`" if value == [] else f"`{value}`"
    value = field.default
    if isinstance(value, Fixed):  # a distribution's default, written as the bare number a scenario gives
        return f"`{value.value:g}`"
    if isinstance(value, BaseModel):
        return "see below"
    if hasattr(value, "value"):
        value = value.value
    return f"`{'null' if value is None else str(value).lower() if isinstance(value, bool) else value}`"


def _section(title: str, model: type[BaseModel], out: list[str], nested: list[tuple[str, type[BaseModel]]]) -> None:
    doc = (model.__doc__ or "").strip().splitlines()
    out += [f"## `{title}`", ""]
    if doc and model is not Scenario:
        out += [doc[0], ""]
    out += ["| field | type | default | meaning |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        key = field.alias or name
        annotation = field.annotation
        kind = _special_kind(field)
        for sub in [] if kind else _models_in(annotation):
            if sub is not Threshold and sub is not model:
                suffix = "[]" if typing.get_origin(annotation) is list or "list[" in str(annotation) else ""
                suffix = ".<name>" if "dict[" in str(annotation) else suffix
                nested.append((f"{title}.{key}{suffix}" if title != "scenario" else f"{key}{suffix}", sub))
        desc = (field.description or "").replace("|", "\\|")
        default = _default(field)
        if kind and kind.startswith("duration") and isinstance(field.default, (int, float)):
            default = f"`{field.default:g}s`"
        out.append(f"| `{key}` | {kind or _type_name(annotation)} | {default} | {desc} |")
    out.append("")


def markdown() -> str:
    out = [_INTRO]
    queue: list[tuple[str, type[BaseModel]]] = [("scenario", Scenario)]
    while queue:
        title, model = queue.pop(0)
        nested: list[tuple[str, type[BaseModel]]] = []
        _section(title, model, out, nested)
        queue = nested + queue
    out += ["## Shapes", "", "A load level over time, given as `rate` (requests/s) or `concurrency` (users).", ""]
    for name in SHAPES.names:
        _section(f"type: {name}", SHAPES[name], out, [])
    out += [
        "## `thresholds`",
        "",
        "A list of k6-style expressions, each a string or `{expr: ..., abort_on_fail: true}`:",
        "`p99(ttft) < 2s`, `mean(itl) <= 50ms`, `p90(e2e) < 3s`, `error_rate < 0.5%`, `drop_rate < 1%`,",
        "`throughput > 10` (successful requests/s), `output_tokens_per_s > 500`, `goodput > 8`.",
        "Latency metrics: `ttft`, `itl`, `tpot`, `e2e`; aggregations: `pNN`, `mean`, `min`, `max`, `median`.",
        "A failed threshold makes `surgelab run` exit with code 1; one with `abort_on_fail` stops the run",
        "as soon as it fails after the warm-up (latency and ratio thresholds only; rates are judged at the end).",
        "",
    ]
    return "\n".join(out)
