"""Recorded agent traces: OpenTelemetry GenAI spans, exported as JSON, read into the calls of each task.

A trace (``traceId``) is one task. Its model calls (``gen_ai.operation.name`` chat, text_completion
or generate_content, or a span named ``chat …``) are the requests, with their recorded
``gen_ai.usage.input_tokens`` and ``gen_ai.usage.output_tokens``; its tool calls (``execute_tool``,
and the other services an agent waits for: embeddings, retrieval, memory) are waits of their
recorded duration; ``invoke_agent`` and ``create_agent`` spans are (sub)agents, and they and
``invoke_workflow``, ``plan`` and spans of no GenAI operation group what they hold.

The DAG comes from the tree and the clock: within one parent, a child waits for every sibling
that ended before it started (and for what its parent waited for), so children that overlap
run in parallel — fan-out — and a branch is whatever its span holds. A model call's prompt
opens with the exchanges of the earlier calls of its own agent (its context); a subagent
starts its own.

Three shapes are read: OTLP/JSON (``{"resourceSpans": [{"scopeSpans": [{"spans": [...]}]}]}``),
JSON lines of such objects (the collector's file exporter), and a JSON list of spans, each
either OTLP's (``traceId``, ``spanId``, ``parentSpanId``, ``startTimeUnixNano``, attributes as
key-value pairs) or the OpenTelemetry SDK's ``to_json`` (``context.trace_id``, ``parent_id``,
ISO ``start_time``, attributes as an object). Anything else is a :class:`TraceError` naming
the file, the span (counted from 1 in file order) and its id, and the field.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from surgelab.traces.formats import show_value
from surgelab.traces.trace import TraceError

__all__ = ["AgentTrace", "AgentTraces", "RecordedCall", "read_agent_traces", "read_agent_traces_cached"]

MODEL_OPERATIONS = ("chat", "text_completion", "generate_content")
WAIT_OPERATIONS = ("execute_tool", "embeddings", "retrieval", "search_memory", "create_memory", "update_memory",
                   "upsert_memory", "delete_memory", "create_memory_store", "delete_memory_store")  # fmt: skip
AGENT_OPERATIONS = ("invoke_agent", "create_agent")
GROUP_OPERATIONS = (*AGENT_OPERATIONS, "invoke_workflow", "plan")
_MAX_DEPTH = 256
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One model call (a request) or tool call (a wait) of a recorded task, numbered in start order."""

    name: str  # reported as: the agent's name (a model call) or the tool's
    model: bool  # a model call; False: a tool's (or another service's) time, waited
    parents: tuple[int, ...]  # the calls it waited for (none it waited for through another)
    think_s: float  # from its last parent's end (a root: from the task's start) to its own start
    duration_s: float
    input_tokens: int  # a model call's recorded lengths (0 for a tool)
    output_tokens: int
    context: tuple[int, ...]  # a model call's earlier calls of its own agent: its prompt opens with them
    span_id: str


@dataclass(frozen=True, eq=False)
class AgentTrace:
    """One recorded task: its calls, each after its parents (parents have smaller numbers)."""

    trace_id: str
    calls: tuple[RecordedCall, ...]
    duration_s: float

    @property
    def requests(self) -> int:
        return sum(call.model for call in self.calls)


@dataclass(frozen=True, eq=False)
class AgentTraces:
    """The tasks of one file, in the order they started."""

    source: Path
    traces: tuple[AgentTrace, ...]

    def __len__(self) -> int:
        return len(self.traces)

    def step_names(self) -> list[str]:
        """The names model calls are reported under, in first-seen order."""
        return list(dict.fromkeys(c.name for t in self.traces for c in t.calls if c.model))


@dataclass(slots=True)
class _Span:
    number: int  # 1-based, in file order
    line: int | None  # the JSON line it came from (JSON lines only)
    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    kind: str = "other"  # model, wait, group or other


class _Reader:
    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, span: _Span | dict | None, message: str, number: int = 0, line: int | None = None) -> TraceError:
        if isinstance(span, _Span):
            number, line = span.number, span.line
            where = f"span {number} (id {span.span_id}, {span.name!r})"
        elif isinstance(span, dict) and number:
            context = span.get("context")
            ident = _first(span, "spanId", "span_id") or (context.get("span_id") if isinstance(context, dict) else None)
            where = f"span {number}" + (f" (id {ident})" if isinstance(ident, str) else "")
        else:
            where = ""
        return TraceError(f"{where}: {message}" if where else message, self.path, line)

    # --- the file's shapes -------------------------------------------------------------------

    def spans(self, data: bytes) -> list[_Span]:
        head = data.lstrip(b"\xef\xbb\xbf \t\r\n")
        raw: list[tuple[dict, int | None]] = []
        try:
            document = orjson.loads(head)
        except orjson.JSONDecodeError as error:
            lines = [ln for ln in head.split(b"\n") if ln.strip()]
            if not head.startswith(b"{") or len(lines) < 2:
                raise self.fail(None, f"expected JSON ({error})") from None
            for number, text in enumerate(data.split(b"\n"), start=1):
                if text.strip():
                    try:
                        item = orjson.loads(text.lstrip(b"\xef\xbb\xbf"))
                    except orjson.JSONDecodeError as error:
                        raise TraceError(f"expected an OTLP/JSON object a line ({error})", self.path, number) from None
                    raw.extend((s, number) for s in self._otlp(item, number))
        else:
            items = document if isinstance(document, list) else [document]
            for item in items:
                if isinstance(item, dict) and ("resourceSpans" in item or "resource_spans" in item):
                    raw.extend((s, None) for s in self._otlp(item, None))
                elif isinstance(document, list):
                    raw.append((item, None))
                else:
                    raise self.fail(None, _SHAPES)
        if not raw:
            raise self.fail(None, "no spans")
        return [self._span(item, number, line) for number, (item, line) in enumerate(raw, start=1)]

    def _otlp(self, item: Any, line: int | None) -> list[Any]:
        resources = _first(item, "resourceSpans", "resource_spans") if isinstance(item, dict) else None
        if not isinstance(resources, list):
            raise TraceError(_SHAPES, self.path, line)
        found = []
        for resource in resources:
            scopes = (
                _first(resource, "scopeSpans", "scope_spans", "instrumentationLibrarySpans")
                if isinstance(resource, dict)
                else None
            )
            if not isinstance(scopes, list):
                raise TraceError("expected resourceSpans[].scopeSpans, a list", self.path, line)
            for scope in scopes:
                spans = scope.get("spans", []) if isinstance(scope, dict) else None
                if not isinstance(spans, list):
                    raise TraceError("expected scopeSpans[].spans, a list", self.path, line)
                found.extend(spans)
        return found

    def _span(self, item: Any, number: int, line: int | None) -> _Span:
        if not isinstance(item, dict):
            raise self.fail(None, f"span {number}: expected a JSON object, got {show_value(item)}", line=line)
        sdk = "context" in item and "traceId" not in item
        if sdk:  # the OpenTelemetry SDK's ReadableSpan.to_json()
            context = item.get("context")
            context = context if isinstance(context, dict) else {}
            trace_id, span_id, parent = context.get("trace_id"), context.get("span_id"), item.get("parent_id")
            fields = ("context.trace_id", "context.span_id", "parent_id", "start_time", "end_time")
            start, end = item.get("start_time"), item.get("end_time")
        else:
            trace_id, span_id = _first(item, "traceId", "trace_id"), _first(item, "spanId", "span_id")
            parent = _first(item, "parentSpanId", "parent_span_id")
            fields = ("traceId", "spanId", "parentSpanId", "startTimeUnixNano", "endTimeUnixNano")
            start, end = (
                _first(item, "startTimeUnixNano", "start_time_unix_nano"),
                _first(item, "endTimeUnixNano", "end_time_unix_nano"),
            )
        trace_id = self._id(item, fields[0], trace_id, number, line)
        span_id = self._id(item, fields[1], span_id, number, line)
        if parent is not None and not isinstance(parent, str):
            raise self.fail(item, f"expected {fields[2]}, an id or empty, got {show_value(parent)}", number, line)
        name = item.get("name")
        if not isinstance(name, str):
            raise self.fail(item, f"expected name, a string, got {show_value(name)}", number, line)
        start_ns = self._time(item, fields[3], start, sdk, number, line)
        end_ns = self._time(item, fields[4], end, sdk, number, line)
        if end_ns < start_ns:
            raise self.fail(item, f"{fields[4]} is before {fields[3]}", number, line)
        attributes = item.get("attributes", {} if sdk else [])
        return _Span(number, line, _norm(trace_id), _norm(span_id), _norm(parent) if parent else None, name, start_ns,
                     end_ns, self._attributes(item, attributes, number, line))  # fmt: skip

    def _id(self, item: dict, field: str, value: Any, number: int, line: int | None) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(item, f"expected {field}, an id, got {show_value(value)}", number, line)
        return value

    def _time(self, item: dict, field: str, value: Any, iso: bool, number: int, line: int | None) -> int:
        if iso and isinstance(value, str):
            try:
                moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                moment = None
            if moment is not None:
                moment = moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
                return (moment - _EPOCH) // _MICROSECOND * 1000
        elif not iso and isinstance(value, (int, str)) and not isinstance(value, bool) and str(value).isdigit():
            return int(value)
        what = "an ISO date and time" if iso else "nanoseconds since 1970, an integer (or a string of digits)"
        raise self.fail(item, f"expected {field}, {what}, got {show_value(value)}", number, line)

    def _attributes(self, item: dict, value: Any, number: int, line: int | None) -> dict[str, Any]:
        if isinstance(value, dict):
            return value
        if not isinstance(value, list):
            raise self.fail(
                item, f"expected attributes, a list of key-value pairs, got {show_value(value)}", number, line
            )
        out = {}
        for pair in value:
            if not isinstance(pair, dict) or not isinstance(pair.get("key"), str):
                raise self.fail(item, f"expected attributes[] as {{key, value}}, got {show_value(pair)}", number, line)
            any_value = pair.get("value")
            out[pair["key"]] = next(iter(any_value.values()), None) if isinstance(any_value, dict) else any_value
        return out

    # --- one trace's DAG ---------------------------------------------------------------------

    def classify(self, span: _Span) -> None:
        op = span.attributes.get("gen_ai.operation.name")
        if op is None:
            span.kind = "model" if span.name.startswith("chat ") else "other"
            return
        if not isinstance(op, str):
            raise self.fail(span, f"expected gen_ai.operation.name, a string, got {show_value(op)}")
        if op in MODEL_OPERATIONS:
            span.kind = "model"
        elif op in WAIT_OPERATIONS:
            span.kind = "wait"
        elif op in GROUP_OPERATIONS:
            span.kind = "group"
        else:
            raise self.fail(span, f"gen_ai.operation.name {op!r} is not one a replay knows: a model call "
                                  f"({', '.join(MODEL_OPERATIONS)}), a wait ({', '.join(WAIT_OPERATIONS[:3])}, memory "
                                  f"operations) or a group ({', '.join(GROUP_OPERATIONS)})")  # fmt: skip

    def tokens(self, span: _Span, name: str, old: str) -> int:
        attributes = span.attributes
        value = attributes.get(name, attributes.get(old))
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            got = "none" if value is None else show_value(value)
            raise self.fail(span, f"expected {name}, a whole number of tokens, on a model call; got {got}")
        return value


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


class _Layout:
    """One trace laid out as calls: each child of a span after the siblings that ended before it started."""

    def __init__(self, reader: _Reader, children: dict[str, list[_Span]], start_ns: int) -> None:
        self.reader, self.children, self.start_ns = reader, children, start_ns
        self.calls: list[RecordedCall] = []
        self.ends: list[int] = []
        self.ancestors: list[int] = []  # a bit per call
        self.agents: list[str | None] = []  # each call's agent span
        self.below: dict[str, frozenset[str]] = {}

    def kinds_below(self, span: _Span) -> frozenset[str]:
        if span.span_id not in self.below:
            kinds: set[str] = set()
            for child in self.children.get(span.span_id, ()):
                kinds |= {child.kind, *self.kinds_below(child)}
            self.below[span.span_id] = frozenset(kinds)
        return self.below[span.span_id]

    def place(self, kids: list[_Span], after: int, agent: _Span | None) -> int:
        """Lay out ``kids`` (in start order), each waiting for ``after``; the calls nothing after them waits for."""
        placed: list[tuple[int, int]] = []  # each placed child's end and the calls it ends with
        followed: list[bool] = []
        for span in kids:
            deps = after
            for j, (end, exits) in enumerate(placed):
                if end <= span.start_ns:
                    deps |= exits
                    followed[j] = True
            below = self.kinds_below(span)
            if span.kind == "model":
                if below - {"other"}:
                    raise self.reader.fail(span, "a model call holds GenAI spans (model calls, tools or agents): "
                                                 "a replay cannot tell when they ran")  # fmt: skip
                exits = 1 << self.add(span, deps, agent)
            elif span.kind == "wait" and "model" not in below:
                exits = 1 << self.add(span, deps, agent)
            elif span.span_id in self.children:
                is_agent = span.attributes.get("gen_ai.operation.name") in AGENT_OPERATIONS
                exits = self.place(self.children[span.span_id], deps, span if is_agent else agent)
            else:
                continue  # a span of no GenAI operation, holding none: its time stays in the gaps
            placed.append((span.end_ns, exits))
            followed.append(False)
        if not placed:
            return after
        ends = 0
        for (_, exits), done in zip(placed, followed, strict=True):
            if not done:
                ends |= exits
        return ends

    def add(self, span: _Span, deps: int, agent: _Span | None) -> int:
        number = len(self.calls)
        covered = 0
        for q in _bits(deps):
            covered |= self.ancestors[q]
        parents = tuple(_bits(deps & ~covered))
        last_end = max((self.ends[p] for p in parents), default=self.start_ns)
        attributes = span.attributes
        agent_id = agent.span_id if agent is not None else None
        if span.kind == "model":
            inputs = self.reader.tokens(span, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
            outputs = self.reader.tokens(span, "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
            name = _text(attributes.get("gen_ai.agent.name")) or _agent_name(agent)
            name = name or _text(attributes.get("gen_ai.request.model")) or span.name
            context = tuple(k for k in _bits(deps | covered) if self.calls[k].model and self.agents[k] == agent_id)
        else:
            inputs = outputs = 0
            name = _text(attributes.get("gen_ai.tool.name")) or span.name.removeprefix("execute_tool ")
            context = ()
        self.calls.append(RecordedCall(
            name, span.kind == "model", parents, max(span.start_ns - last_end, 0) / 1e9,
            (span.end_ns - span.start_ns) / 1e9, inputs, outputs, context, span.span_id,
        ))  # fmt: skip
        self.ends.append(span.end_ns)
        self.ancestors.append(deps | covered)
        self.agents.append(agent_id)
        return number


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _agent_name(agent: _Span | None) -> str | None:
    if agent is None:
        return None
    named = _text(agent.attributes.get("gen_ai.agent.name"))
    return named or agent.name.removeprefix("invoke_agent ").removeprefix("create_agent ")


def _trace(reader: _Reader, trace_id: str, spans: list[_Span]) -> AgentTrace:
    by_id: dict[str, _Span] = {}
    for span in spans:
        if span.span_id in by_id:
            raise reader.fail(span, f"its spanId is also span {by_id[span.span_id].number}'s, in the same trace")
        by_id[span.span_id] = span
        reader.classify(span)
    children: dict[str, list[_Span]] = {}
    roots = []
    for span in spans:
        if span.parent_id is None:
            roots.append(span)
        elif span.parent_id not in by_id:
            raise reader.fail(span, f"its parent {span.parent_id} is no span of trace {trace_id} in the file")
        else:
            children.setdefault(span.parent_id, []).append(span)
    order = lambda span: (span.start_ns, span.number)  # noqa: E731
    for kids in children.values():
        kids.sort(key=order)
    roots.sort(key=order)
    level, depth = roots, 0
    reached = {span.span_id for span in roots}
    while level:
        depth += 1
        level = [kid for span in level for kid in children.get(span.span_id, ())]
        reached.update(span.span_id for span in level)
        if depth > _MAX_DEPTH and level:
            raise reader.fail(level[0], f"spans nest deeper than {_MAX_DEPTH} levels")
    lost = [span for span in spans if span.span_id not in reached]
    if lost:
        raise reader.fail(lost[0], "its parents never reach a root: their parentSpanIds make a cycle")
    start = min(span.start_ns for span in spans)
    layout = _Layout(reader, children, start)
    layout.place(roots, 0, None)
    if not any(call.model for call in layout.calls):
        raise reader.fail(spans[0], f"trace {trace_id} has no model call ({', '.join(MODEL_OPERATIONS)}) to replay")
    return AgentTrace(trace_id, tuple(layout.calls), (max(span.end_ns for span in spans) - start) / 1e9)


def read_agent_traces(path: str | Path) -> AgentTraces:
    """The tasks recorded in an OpenTelemetry JSON export; raises :class:`TraceError` for anything unusable."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise TraceError(f"cannot read the file ({error.strerror or error})", path) from None
    if not data.strip():
        raise TraceError("empty file", path)
    reader = _Reader(path)
    by_trace: dict[str, list[_Span]] = {}
    for span in reader.spans(data):
        by_trace.setdefault(span.trace_id, []).append(span)
    traces = [_trace(reader, trace_id, spans) for trace_id, spans in by_trace.items()]
    starts = {trace_id: min((s.start_ns, s.number) for s in spans) for trace_id, spans in by_trace.items()}
    traces.sort(key=lambda t: starts[t.trace_id])
    return AgentTraces(path, tuple(traces))


@functools.lru_cache(maxsize=8)
def read_agent_traces_cached(path: str) -> AgentTraces:
    """``read_agent_traces`` once per process for the same file (a scenario, its runner and its report share it)."""
    return read_agent_traces(path)


_SHAPES = ("expected OTLP/JSON ({resourceSpans: [{scopeSpans: [{spans: [...]}]}]}), JSON lines of such objects, "
           "or a JSON list of spans")  # fmt: skip
_MICROSECOND = datetime.resolution


def _first(item: dict, *keys: str) -> Any:
    for key in keys:
        if key in item:
            return item[key]
    return None


def _norm(ident: str) -> str:
    """An id as one spelling: the SDK's ``0x…`` and OTLP's hex name the same span."""
    text = ident.strip().removeprefix("0x")
    return text.lower() if all(c in "0123456789abcdefABCDEF" for c in text) else text
