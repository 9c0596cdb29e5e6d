"""OpenTelemetry GenAI spans for the replay tests, written as an instrumentation exports them (OTLP/JSON)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

BASE_NS = 1_767_261_600_000_000_000  # 2026-01-01T10:00:00Z


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, int):
        return {"intValue": str(value)}  # proto3 JSON writes 64-bit integers as strings
    return {"stringValue": value}


def span(trace: str, sid: str, parent: str | None, name: str, t0: float, t1: float, **attributes: Any) -> dict:
    """An OTLP/JSON span, ``t0`` and ``t1`` in seconds after ``BASE_NS`` (whole microseconds)."""
    return {
        "traceId": trace, "spanId": sid, "parentSpanId": parent or "", "name": name, "kind": 1,
        "startTimeUnixNano": str(BASE_NS + round(t0 * 1e6) * 1000), "endTimeUnixNano": str(BASE_NS + round(t1 * 1e6) * 1000),
        "attributes": [{"key": k.replace("__", "."), "value": _value(v)} for k, v in attributes.items()],
    }  # fmt: skip


def agent(trace: str, sid: str, parent: str | None, name: str, t0: float, t1: float) -> dict:
    return span(trace, sid, parent, f"invoke_agent {name}", t0, t1, gen_ai__operation__name="invoke_agent",
                gen_ai__agent__name=name)  # fmt: skip


def chat(trace: str, sid: str, parent: str | None, t0: float, t1: float, inputs: int, outputs: int) -> dict:
    return span(trace, sid, parent, "chat gpt-4o-mini", t0, t1, gen_ai__operation__name="chat",
                gen_ai__request__model="gpt-4o-mini", gen_ai__usage__input_tokens=inputs,
                gen_ai__usage__output_tokens=outputs)  # fmt: skip


def tool(trace: str, sid: str, parent: str | None, name: str, t0: float, t1: float) -> dict:
    return span(trace, sid, parent, f"execute_tool {name}", t0, t1, gen_ai__operation__name="execute_tool",
                gen_ai__tool__name=name)  # fmt: skip


def otlp(spans: list[dict]) -> dict:
    """The spans as one OTLP/JSON export."""
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "tests"}}]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": {"name": "tests"}, "spans": spans}]}]}


def sdk(item: dict) -> dict:
    """An OTLP/JSON span as the OpenTelemetry SDK's ``ReadableSpan.to_json()`` writes it."""

    def iso(ns: str) -> str:
        return datetime.fromtimestamp(int(ns) // 1000 / 1e6, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    attributes = {a["key"]: next(iter(a["value"].values())) for a in item["attributes"]}
    attributes = {k: int(v) if k.startswith("gen_ai.usage.") else v for k, v in attributes.items()}
    return {
        "name": item["name"], "context": {"trace_id": "0x" + item["traceId"], "span_id": "0x" + item["spanId"],
                                          "trace_state": "[]"},
        "kind": "SpanKind.INTERNAL", "parent_id": "0x" + item["parentSpanId"] if item["parentSpanId"] else None,
        "start_time": iso(item["startTimeUnixNano"]), "end_time": iso(item["endTimeUnixNano"]),
        "status": {"status_code": "UNSET"}, "attributes": attributes, "events": [], "links": [],
    }  # fmt: skip


def write(path: Path, document: Any) -> str:
    path.write_bytes(orjson.dumps(document))
    return str(path)


FANOUT = "4bf92f3577b34da6a3ce929d0e0e4736"
TOOLS = "7a1c9e04f2d84c0b9e55b1d3c6a2f018"


def fanout_trace() -> list[dict]:
    """A plan, two researcher subagents whose chats overlap, a merge once both ended."""
    t = FANOUT
    return [
        agent(t, "00f067aa0ba902b7", None, "orchestrator", 0.0, 1.0),
        chat(t, "00f067aa0ba902b8", "00f067aa0ba902b7", 0.0, 0.10, 40, 6),
        agent(t, "00f067aa0ba902b9", "00f067aa0ba902b7", "researcher", 0.12, 0.60),
        chat(t, "00f067aa0ba902ba", "00f067aa0ba902b9", 0.13, 0.40, 30, 24),
        agent(t, "00f067aa0ba902bb", "00f067aa0ba902b7", "researcher", 0.12, 0.55),
        chat(t, "00f067aa0ba902bc", "00f067aa0ba902bb", 0.13, 0.45, 32, 24),
        chat(t, "00f067aa0ba902bd", "00f067aa0ba902b7", 0.62, 0.90, 60, 8),
    ]


def tool_trace() -> list[dict]:
    """A call, a tool of 0.3 s (0.02 s after the call ended), the next call 0.03 s after the tool."""
    t = TOOLS
    return [
        agent(t, "53995c3f42cd8ad8", None, "support", 0.0, 1.0),
        chat(t, "53995c3f42cd8ad9", "53995c3f42cd8ad8", 0.0, 0.10, 30, 4),
        tool(t, "53995c3f42cd8ada", "53995c3f42cd8ad8", "lookup_order", 0.12, 0.42),
        chat(t, "53995c3f42cd8adb", "53995c3f42cd8ad8", 0.45, 0.60, 50, 6),
    ]
