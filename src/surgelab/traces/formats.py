"""The formats a trace comes in: presets for the public traces, column mappings, and telling them apart.

A preset names the columns (CSV) or fields (JSONL) of one public format; ``columns=`` maps
:data:`COLUMN_KEYS` to the names of any other file. :func:`detect_format` tells the presets
apart by the header or the first record.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson

from surgelab.traces.trace import TraceError

__all__ = ["COLUMN_KEYS", "FORMATS", "PRESETS", "UNITS", "Spec", "detect_format", "show_value", "with_columns"]

FORMATS = ("auto", "azure", "burstgpt", "mooncake", "lengths", "jsonl", "sharegpt", "csv")
COLUMN_KEYS = ("timestamp", "timestamp_unit", "prompt_tokens", "output_tokens", "prompt", "hash_ids")
"""Keys of the ``columns`` mapping; each names a column (CSV) or field (JSONL) of the file."""

UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9, "datetime": 1e-6}


def show_value(value: Any) -> str:
    """A value as quoted in an error message: its repr, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass(frozen=True)
class Spec:
    """Where a format keeps each column, and how its rows are judged."""

    kind: str  # "csv", "jsonl", "sharegpt", or "sniff" (CSV or JSONL, decided by the content)
    timestamp: str | None = None
    timestamp_unit: str = "s"
    prompt_tokens: str | None = None
    output_tokens: str | None = None
    prompt: str | None = None
    hash_ids: str | None = None
    zero_output_fails: bool = False
    output_required: bool = True


PRESETS: dict[str, Spec] = {
    "azure": Spec("csv", "TIMESTAMP", "datetime", "ContextTokens", "GeneratedTokens"),
    "burstgpt": Spec("csv", "Timestamp", "s", "Request tokens", "Response tokens", zero_output_fails=True),
    "mooncake": Spec("jsonl", "timestamp", "ms", "input_length", "output_length", hash_ids="hash_ids"),
    "lengths": Spec("csv", None, "s", "num_prefill_tokens", "num_decode_tokens"),
    "jsonl": Spec("jsonl", output_tokens="output_tokens", prompt="prompt", output_required=False),
    "sharegpt": Spec("sharegpt"),
    "csv": Spec("sniff"),
}


def with_columns(spec: Spec, columns: Mapping[str, str] | None) -> Spec:
    if not columns:
        return spec
    unknown = sorted(set(columns) - set(COLUMN_KEYS))
    if unknown:
        raise TraceError(f"unknown key {unknown[0]!r} in columns; expected some of {', '.join(COLUMN_KEYS)}")
    for key, value in columns.items():
        if value is not None and not isinstance(value, str):
            raise TraceError(f"columns[{key!r}] must be a column name (a string), got {value!r}")
    unit = columns.get("timestamp_unit")
    if unit is not None and unit not in UNITS:
        raise TraceError(f"timestamp_unit must be one of {', '.join(UNITS)}, got {unit!r}")
    given: dict[str, Any] = {k: v for k, v in columns.items() if v is not None}  # COLUMN_KEYS: Spec's str fields
    return replace(spec, **given)


def detect_format(data: bytes, path: Path, has_columns: bool) -> str:
    head = data.lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(b"["):
        return "sharegpt"
    if head.startswith(b"{"):
        for number, raw in enumerate(data.split(b"\n")[:50], start=1):
            try:
                record = orjson.loads(raw.lstrip(b"\xef\xbb\xbf"))
            except orjson.JSONDecodeError:
                continue
            if not isinstance(record, dict):
                continue
            if "hash_ids" in record or {"input_length", "output_length"} <= record.keys():
                return "mooncake"
            if has_columns:
                return "csv"
            if "prompt" in record or "messages" in record:
                return "jsonl"
            keys = ", ".join(repr(k) for k in list(record)[:8])
            raise TraceError(
                f"cannot tell the JSONL format from the fields {keys}; give format or columns", path, number
            )
        raise TraceError("expected JSON objects, one a line, to tell the format", path)
    first = head.split(b"\n", 1)[0].decode("utf-8", "replace")
    try:
        names = {n.strip() for n in next(csv.reader([first]), [])}
    except csv.Error:
        names = set()
    if {"TIMESTAMP", "ContextTokens", "GeneratedTokens"} <= names:
        return "azure"
    if {"Timestamp", "Request tokens", "Response tokens"} <= names:
        return "burstgpt"
    if {"num_prefill_tokens", "num_decode_tokens"} <= names:
        return "lengths"
    if has_columns:
        return "csv"
    raise TraceError(
        f"cannot tell the format from the first line {show_value(first)}; give format (one of "
        f"{', '.join(FORMATS[1:])}) or columns",
        path,
        1,
    )
