"""Timestamped traces and length tables, read into one typed, columnar :class:`Trace`.

One reader covers the public formats through presets — Azure LLM inference (``azure``),
BurstGPT (``burstgpt``), Mooncake (``mooncake``), Vidur/Sarathi length tables
(``lengths``), JSONL of prompts (``jsonl``), ShareGPT (``sharegpt``) — and any other CSV or
JSONL through a column mapping (``csv``). ``format="auto"`` tells them apart by the header
or the first record.

Every row the reader cannot use becomes a :class:`RowProblem` with its 1-based line in the
file; ``on_bad_row="skip"`` keeps going and lists them in ``Trace.skipped``,
``on_bad_row="fail"`` stops at the first with ``TraceError("FILE:LINE: ...")``. Bad input
never surfaces as any other exception.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import io
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from surgelab.tokenizer import MAX_TOKENS, BuiltinTokenizer
from surgelab.traces.formats import FORMATS, PRESETS, UNITS, Spec, detect_format, show_value, with_columns
from surgelab.traces.trace import RowProblem, Trace, TraceError

__all__ = ["read_trace", "read_trace_cached"]

_MAX_COUNT = 1 << 53
_MAX_ID = 1 << 63
_DATETIME = re.compile(r"\d{4}-\d\d-\d\d(?:[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?)?Z?")
_HUMAN = frozenset({"human", "user"})
_MODEL = frozenset({"gpt", "chatgpt", "assistant", "model"})


# --- field parsing ------------------------------------------------------------------------


class _Bad(Exception):
    """A row that is malformed: fatal under ``on_bad_row="fail"``."""


class _NotApplicable(_Bad):
    """A well-formed row the format does not use (a ShareGPT conversation with no reply): always skipped."""


def _count(value: Any, name: str) -> int:
    n: int | None = None
    if isinstance(value, bool):
        pass
    elif isinstance(value, int):
        n = value
    elif isinstance(value, float):
        n = int(value) if value.is_integer() else None
    elif isinstance(value, str):
        text = value.strip()
        try:
            n = int(text)
        except ValueError:
            try:
                number = float(text)
            except ValueError:
                number = math.nan
            n = int(number) if number.is_integer() else None
    if n is None or n < 0 or n >= _MAX_COUNT:
        raise _Bad(f"expected a non-negative integer for {name!r}, got {show_value(value)}")
    return n


def _tokens(n: int, name: str) -> int:
    """A prompt or output length within the cap every length obeys (``--prompt-tokens`` too)."""
    if n > MAX_TOKENS:
        raise _Bad(f"{n:,} tokens for {name!r} is more than any model takes (at most {MAX_TOKENS:,})")
    return n


def _seconds(value: Any, name: str, unit: str) -> float:
    number = math.nan
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value) if abs(value) < 1e300 else math.nan
    elif isinstance(value, str):
        with contextlib.suppress(ValueError):
            number = float(value.strip())
    if not math.isfinite(number):
        raise _Bad(f"expected a number of {unit} for {name!r}, got {show_value(value)}")
    return number


def _datetime_us(value: Any, name: str) -> int:
    text = value.strip() if isinstance(value, str) else ""
    if _DATETIME.fullmatch(text):
        text = text.rstrip("Z")
        head, dot, fraction = text.partition(".")
        try:
            return int(np.datetime64(head + dot + fraction[:6], "us").astype(np.int64))
        except ValueError:
            pass
    raise _Bad(f"expected a date and time like '2023-11-16 18:15:46.6805900' for {name!r}, got {show_value(value)}")


def _hash_ids(value: Any, name: str) -> tuple[int, ...]:
    if isinstance(value, str):  # a CSV cell holding a JSON list
        with contextlib.suppress(orjson.JSONDecodeError):
            value = orjson.loads(value)
    if isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) and -_MAX_ID <= v < _MAX_ID for v in value
    ):
        return tuple(value)
    raise _Bad(f"expected a list of integer block ids for {name!r}, got {show_value(value)}")


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts; text parts only
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        texts = [p for p in parts if isinstance(p, str)]
        if len(texts) == len(parts):
            return "\n".join(texts)
    raise _Bad(f"expected message content as text, got {show_value(content)}")


def _messages(value: Any) -> tuple[str, str | None]:
    """Prompt text of OpenAI-style messages, and a trailing assistant reply if there is one."""
    if not isinstance(value, list) or not value or not all(isinstance(m, dict) for m in value):
        raise _Bad(f"expected 'messages' as a non-empty list of objects, got {show_value(value)}")
    reply = None
    if len(value) > 1 and value[-1].get("role") == "assistant":
        reply = _content_text(value[-1].get("content"))
        value = value[:-1]
    return "\n".join(_content_text(m.get("content")) for m in value), reply


# --- the row collector --------------------------------------------------------------------


class _Rows:
    """Columns under construction, and the bad-row policy."""

    def __init__(self, spec: Spec, path: Path, fail: bool, block_size: int) -> None:
        self.spec, self.path, self.fail, self.block_size = spec, path, fail, block_size
        self.tokenizer = BuiltinTokenizer()
        self.lines: list[int] = []
        self.times: list[float] | list[int] = []
        self.prompt: list[int] = []
        self.output: list[int] = []
        self.blocks: list[tuple[int, ...]] = []
        self.texts: list[str] = []
        self.skipped: list[RowProblem] = []

    def problem(self, line: int, error: _Bad) -> None:
        if self.fail and not isinstance(error, _NotApplicable):
            raise TraceError(str(error), self.path, line)
        self.skipped.append(RowProblem(line, str(error)))

    def add(self, line: int, get: Any, record: Any = None) -> None:
        """Add one row; ``get(name)`` returns a field or raises ``_Bad``; ``record`` is the JSON object."""
        spec = self.spec
        try:
            time: float | int | None = None
            if spec.timestamp is not None:
                raw = get(spec.timestamp)
                if spec.timestamp_unit == "datetime":
                    time = _datetime_us(raw, spec.timestamp)
                else:
                    time = _seconds(raw, spec.timestamp, spec.timestamp_unit)
            text = reply = None
            if spec.prompt is not None:
                if record is not None and spec.prompt not in record and "messages" in record:
                    text, reply = _messages(record["messages"])
                elif spec.prompt_tokens is None or record is None or spec.prompt in record:
                    text = get(spec.prompt)
                    if not isinstance(text, str):
                        raise _Bad(f"expected text for {spec.prompt!r}, got {show_value(text)}")
            if text is not None and not text.strip():
                raise _Bad("empty prompt")
            if spec.prompt_tokens is not None:
                prompt = _tokens(_count(get(spec.prompt_tokens), spec.prompt_tokens), spec.prompt_tokens)
                if prompt == 0:
                    raise _Bad(f"expected at least 1 prompt token for {spec.prompt_tokens!r}, got 0")
            elif text is not None:
                prompt = _tokens(self.tokenizer.count(text), spec.prompt or "messages")
            else:  # pragma: no cover - specs always name one of the two
                raise _Bad("no prompt_tokens or prompt column")
            output = -1
            if spec.output_tokens is not None and (
                spec.output_required or record is None or record.get(spec.output_tokens) is not None
            ):
                output = _tokens(_count(get(spec.output_tokens), spec.output_tokens), spec.output_tokens)
            elif reply is not None:
                output = _tokens(self.tokenizer.count(reply), "reply")
            blocks = None
            if spec.hash_ids is not None:
                blocks = _hash_ids(get(spec.hash_ids), spec.hash_ids)
                expected = -(-prompt // self.block_size)
                if len(blocks) != expected:
                    raise _Bad(
                        f"expected {expected} hash_ids for {prompt} prompt tokens in blocks of {self.block_size}, "
                        f"got {len(blocks)}"
                    )
        except _Bad as error:
            self.problem(line, error)
            return
        self.lines.append(line)
        if time is not None:
            self.times.append(time)  # type: ignore[arg-type]
        self.prompt.append(prompt)
        self.output.append(output)
        if blocks is not None:
            self.blocks.append(blocks)
        if text is not None:
            self.texts.append(text)

    def add_pair(self, line: int, prompt: str, reply: str) -> None:
        prompt_tokens, output_tokens = _tokens(self.tokenizer.count(prompt), "prompt"), _tokens(self.tokenizer.count(reply), "reply")
        self.lines.append(line)
        self.texts.append(prompt)
        self.prompt.append(prompt_tokens)
        self.output.append(output_tokens)

    def finish(self, fmt: str) -> Trace:
        n = len(self.lines)
        if n == 0:
            detail = ""
            if self.skipped:
                first = self.skipped[0]
                detail = f"; {len(self.skipped)} skipped, the first at line {first.line}: {first.message}"
            raise TraceError(f"no valid rows{detail}", self.path)
        output = np.array(self.output, dtype=np.int64)
        has_times = bool(self.times)
        order = np.arange(n)
        offsets = np.zeros(n, dtype=np.float64)
        if has_times:
            if self.spec.timestamp_unit == "datetime":
                times = np.array(self.times, dtype=np.int64)
                order = np.argsort(times, kind="stable")
                offsets = (times[order] - times[order[0]]) * UNITS["datetime"]
            else:
                seconds = np.array(self.times, dtype=np.float64)
                order = np.argsort(seconds, kind="stable")
                offsets = (seconds[order] - seconds[order[0]]) * UNITS[self.spec.timestamp_unit]
            if not np.all(np.isfinite(offsets)):
                raise TraceError("timestamps span too wide a range to represent", self.path)
        sort = (lambda xs: [xs[i] for i in order]) if has_times and np.any(np.diff(order) != 1) else list
        return Trace(
            offsets_s=offsets,
            prompt_tokens=np.array(self.prompt, dtype=np.int64)[order],
            output_tokens=output[order],
            prefix_blocks=sort(self.blocks) if self.spec.hash_ids is not None else None,
            texts=sort(self.texts) if len(self.texts) == n else None,
            failed=(output[order] == 0) if self.spec.zero_output_fails else None,
            source=self.path,
            format=fmt,
            skipped=self.skipped,
            has_timestamps=has_times,
            lines=np.array(self.lines, dtype=np.int64)[order],
            block_size=self.block_size,
        )


# --- file kinds ---------------------------------------------------------------------------


def _csv_records(text: str, rows: _Rows) -> Iterator[tuple[int, list[str]]]:
    """Non-blank CSV records with the line each starts on; unreadable records become problems."""
    reader = csv.reader(io.StringIO(text, newline=""))
    start = 1
    while True:
        try:
            record = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            rows.problem(start, _Bad(f"expected a CSV record ({error})"))
            if reader.line_num < start:
                return
            start = reader.line_num + 1
            continue
        if record and any(f.strip() for f in record):
            yield start, record
        start = reader.line_num + 1


def _read_csv(text: str, rows: _Rows) -> None:
    records = _csv_records(text, rows)
    header_line, header = next(records, (1, []))
    names = [h.strip().lstrip("\ufeff") for h in header]
    spec = rows.spec
    index: dict[str, int] = {}
    for key in (spec.timestamp, spec.prompt_tokens, spec.output_tokens, spec.prompt, spec.hash_ids):
        if key is None:
            continue
        if key not in names:
            found = ", ".join(repr(n) for n in names[:8])
            raise TraceError(f"expected a column named {key!r} in the header; found {found}", rows.path, header_line)
        index[key] = names.index(key)
    width = max(index.values()) + 1

    for line, record in records:
        if len(record) < width:
            rows.problem(line, _Bad(f"expected at least {width} fields, found {len(record)}"))
            continue

        def get(name: str, record: list[str] = record) -> str:
            value = record[index[name]]
            if not value.strip():
                raise _Bad(f"missing value for {name!r}")
            return value

        rows.add(line, get)


def _jsonl_records(data: bytes, rows: _Rows) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError as error:
            rows.problem(number, _Bad(f"expected a JSON object ({error})"))
            continue
        if not isinstance(record, dict):
            rows.problem(number, _Bad(f"expected a JSON object, got {show_value(record)}"))
            continue
        yield number, record


def _read_jsonl(data: bytes, rows: _Rows) -> None:
    spec = rows.spec
    for line, record in _jsonl_records(data, rows):
        if spec.prompt_tokens is None and spec.prompt not in record and "messages" not in record:
            rows.problem(line, _Bad(f"expected a {spec.prompt!r} or 'messages' field"))
            continue

        def get(name: str, record: dict[str, Any] = record) -> Any:
            if name not in record or record[name] is None:
                raise _Bad(f"missing field {name!r}")
            return record[name]

        rows.add(line, get, record)


_WHITESPACE = re.compile(r"[ \t\n\r]*")


def _read_sharegpt(text: str, rows: _Rows) -> None:
    decoder = json.JSONDecoder()
    pos = _WHITESPACE.match(text).end()  # type: ignore[union-attr]
    line = 1 + text.count("\n", 0, pos)
    if text[pos : pos + 1] != "[":
        raise TraceError("expected a JSON list of conversations", rows.path, line)
    counted = pos = pos + 1
    first = True
    while True:
        pos = _WHITESPACE.match(text, pos).end()  # type: ignore[union-attr]
        line += text.count("\n", counted, pos)
        counted = pos
        if first and text[pos : pos + 1] == "]":
            break
        first = False
        try:
            item, end = decoder.raw_decode(text, pos)
        except (json.JSONDecodeError, RecursionError) as error:
            raise TraceError(f"expected a JSON conversation object ({error})", rows.path, line) from None
        try:
            _sharegpt_pair(item, line, rows)
        except _Bad as error:
            rows.problem(line, error)
        pos = _WHITESPACE.match(text, end).end()  # type: ignore[union-attr]
        separator = text[pos : pos + 1]
        if separator == "]":
            break
        if separator != ",":
            line += text.count("\n", counted, pos)
            raise TraceError("expected ',' or ']' after a conversation", rows.path, line)
        pos += 1
    if text[pos + 1 :].strip():
        raise TraceError("expected nothing after the list of conversations", rows.path)


def _sharegpt_pair(item: Any, line: int, rows: _Rows) -> None:
    turns = item.get("conversations") if isinstance(item, dict) else None
    if not isinstance(turns, list) or not all(
        isinstance(t, dict) and isinstance(t.get("from"), str) and isinstance(t.get("value"), str) for t in turns
    ):
        raise _Bad("expected an object with 'conversations': a list of {from, value} turns")
    first = next((i for i, t in enumerate(turns) if t["from"].lower() in _HUMAN), None)
    if first is None:
        raise _NotApplicable("no human turn")
    if first + 1 >= len(turns) or turns[first + 1]["from"].lower() not in _MODEL:
        raise _NotApplicable("no gpt reply after the first human turn")
    prompt, reply = turns[first]["value"], turns[first + 1]["value"]
    if not prompt.strip() or not reply.strip():
        raise _NotApplicable("empty prompt or reply")
    rows.add_pair(line, prompt, reply)


# --- the entry point ----------------------------------------------------------------------


def read_trace(
    path: str | Path,
    format: str = "auto",
    columns: Mapping[str, str] | None = None,
    on_bad_row: str = "skip",
    block_size: int = 512,
) -> Trace:
    """Read a trace or dataset file into a :class:`Trace`, sorted by arrival time.

    ``columns`` maps :data:`COLUMN_KEYS` to the file's column names: required for
    ``format="csv"`` (at least ``prompt_tokens`` or ``prompt``), and it overrides a preset's
    names otherwise. ``timestamp_unit`` is one of ``s``, ``ms``, ``us``, ``ns`` or
    ``datetime`` (ISO-like strings; fractions past microseconds are dropped). Without a
    ``timestamp`` column the trace has ``has_timestamps=False`` and all offsets are 0.
    ``block_size`` is the number of prompt tokens per Mooncake hash id: a row must have
    ``ceil(prompt_tokens / block_size)`` ids.

    Raises :class:`TraceError` for an unreadable, empty or unrecognised file, a file with no
    valid rows, or (with ``on_bad_row="fail"``) the first bad row; :class:`ValueError` for
    arguments that are wrong whatever the file holds.
    """
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
    if on_bad_row not in ("skip", "fail"):
        raise ValueError(f"on_bad_row must be 'skip' or 'fail', got {on_bad_row!r}")
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be a positive integer, got {block_size!r}")
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise TraceError(f"cannot read the file ({error.strerror or error})", path) from None
    if not data.strip():
        raise TraceError("empty file", path)
    if format == "auto":
        format = detect_format(data, path, bool(columns))
    if format == "csv" and not columns:
        raise TraceError("format 'csv' needs columns= naming at least prompt_tokens or prompt", path)
    spec = with_columns(PRESETS[format], columns)
    if spec.kind != "sharegpt" and spec.prompt_tokens is None and spec.prompt is None:
        raise TraceError("columns= must name prompt_tokens or prompt", path)
    if spec.kind == "sniff":
        spec = replace(spec, kind="jsonl" if data.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{") else "csv")
    rows = _Rows(spec, path, on_bad_row == "fail", block_size)
    if spec.kind == "jsonl":
        _read_jsonl(data, rows)
    else:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            raise TraceError("expected UTF-8 text", path, data.count(b"\n", 0, error.start) + 1) from None
        (_read_sharegpt if spec.kind == "sharegpt" else _read_csv)(text, rows)
    return rows.finish(format)


@functools.lru_cache(maxsize=8)
def read_trace_cached(
    path: str, format: str = "auto", columns: tuple[tuple[str, str], ...] = (), on_bad_row: str = "skip", block_size: int = 512
) -> Trace:
    """``read_trace`` once per process for the same arguments (traces are immutable)."""
    return read_trace(path, format, dict(columns) or None, on_bad_row, block_size)
