"""Recorded agent traces read from OpenTelemetry GenAI spans: the shapes of an export, the DAG the spans
give, and a one-line error naming the file, the span and the field for anything that does not fit."""

from __future__ import annotations

import copy

import orjson
import pytest

from surgelab.traces import TraceError
from surgelab.traces.otel_agents import read_agent_traces

from .spans import FANOUT, TOOLS, chat, fanout_trace, otlp, sdk, tool_trace, write


def _shapes(spans: list[dict]) -> dict[str, object]:
    half = len(spans) // 2
    return {
        "otlp": otlp(spans),
        "jsonl": b"\n".join([orjson.dumps(otlp(spans[:half])), orjson.dumps(otlp(spans[half:]))]),
        "list of OTLP spans": spans,
        "list of SDK spans": [sdk(s) for s in spans],
    }


@pytest.mark.parametrize("shape", list(_shapes([])))
def test_every_shape_gives_the_same_tasks(shape, tmp_path):
    spans = [*tool_trace(), *fanout_trace()]
    document = _shapes(spans)[shape]
    path = tmp_path / "spans.json"
    path.write_bytes(document if isinstance(document, bytes) else orjson.dumps(document))
    read = read_agent_traces(path)
    reference = read_agent_traces(write(tmp_path / "otlp.json", otlp(spans)))
    assert [t.trace_id for t in read.traces] == [TOOLS, FANOUT], "in the order they started (ties: file order)"
    assert [t.calls for t in read.traces] == [t.calls for t in reference.traces]
    assert [t.requests for t in read.traces] == [2, 4]


def test_overlapping_children_fan_out_and_a_later_one_waits_for_both(tmp_path):
    (trace,) = read_agent_traces(write(tmp_path / "s.json", otlp(fanout_trace()))).traces
    calls = trace.calls
    assert [(c.name, c.parents, c.input_tokens, c.output_tokens) for c in calls] == [
        ("orchestrator", (), 40, 6),  # the plan
        ("researcher", (0,), 30, 24),  # both subagents wait for the plan only: they overlap
        ("researcher", (0,), 32, 24),
        ("orchestrator", (1, 2), 60, 8),  # the merge started after both ended
    ]
    assert [c.think_s for c in calls] == pytest.approx([0.0, 0.03, 0.03, 0.17]), "start − last parent's end"
    assert [c.context for c in calls] == [(), (), (), (0,)], (
        "a subagent starts its own context; the merge has the plan's"
    )


def test_a_tool_span_is_a_wait_of_its_duration(tmp_path):
    (trace,) = read_agent_traces(write(tmp_path / "s.json", otlp(tool_trace()))).traces
    assert [(c.name, c.model, c.parents) for c in trace.calls] == [
        ("support", True, ()), ("lookup_order", False, (0,)), ("support", True, (1,)),
    ]  # fmt: skip
    assert [c.think_s for c in trace.calls] == pytest.approx([0.0, 0.02, 0.03])
    assert trace.calls[1].duration_s == pytest.approx(0.3)
    assert trace.calls[2].context == (0,), "the second call resends the first's exchange"


def _broken(change) -> dict:
    spans = copy.deepcopy(tool_trace())
    change(spans)
    return otlp(spans)


def _attr(spans, k, key, value):
    spans[k]["attributes"] = [a for a in spans[k]["attributes"] if a["key"] != key]
    if value is not None:
        spans[k]["attributes"].append({"key": key, "value": value})


ERRORS = [
    ("no input tokens", _broken(lambda s: _attr(s, 1, "gen_ai.usage.input_tokens", None)),
     "span 2 (id 53995c3f42cd8ad9, 'chat gpt-4o-mini'): expected gen_ai.usage.input_tokens, a whole number of tokens, "
     "on a model call; got none"),
    ("negative output tokens", _broken(lambda s: _attr(s, 3, "gen_ai.usage.output_tokens", {"intValue": -3})),
     "span 4 (id 53995c3f42cd8adb, 'chat gpt-4o-mini'): expected gen_ai.usage.output_tokens"),
    ("an unknown operation", _broken(lambda s: _attr(s, 2, "gen_ai.operation.name", {"stringValue": "rerank"})),
     "span 3 (id 53995c3f42cd8ada, 'execute_tool lookup_order'): gen_ai.operation.name 'rerank' is not one a replay knows"),
    ("an end before the start", _broken(lambda s: s[2].update(endTimeUnixNano="1")),
     "span 3 (id 53995c3f42cd8ada): endTimeUnixNano is before startTimeUnixNano"),
    ("a time that is no number", _broken(lambda s: s[0].update(startTimeUnixNano="soon")),
     "span 1 (id 53995c3f42cd8ad8): expected startTimeUnixNano, nanoseconds since 1970"),
    ("no span id", _broken(lambda s: s[1].pop("spanId")), "span 2: expected spanId, an id, got None"),
    ("a parent not in the file", _broken(lambda s: s[3].update(parentSpanId="ffffffffffffffff")),
     "span 4 (id 53995c3f42cd8adb, 'chat gpt-4o-mini'): its parent ffffffffffffffff is no span of trace"),
    ("a parent cycle", _broken(lambda s: s[0].update(parentSpanId="53995c3f42cd8ad9")),
     "span 1 (id 53995c3f42cd8ad8, 'invoke_agent support'): its parents never reach a root"),
    ("a tool inside a chat", _broken(lambda s: s[2].update(parentSpanId="53995c3f42cd8ad9")),
     "span 2 (id 53995c3f42cd8ad9, 'chat gpt-4o-mini'): a model call holds GenAI spans"),
    ("a trace of tools only", otlp([tool_trace()[0], tool_trace()[2]]), f"trace {TOOLS} has no model call"),
    ("another JSON object", {"data": []}, "expected OTLP/JSON ({resourceSpans"),
    ("a span that is no object", [3], "span 1: expected a JSON object, got 3"),
]  # fmt: skip


@pytest.mark.parametrize(("document", "message"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_bad_spans_are_one_line_naming_file_span_and_field(document, message, tmp_path):
    path = write(tmp_path / "spans.json", document)
    with pytest.raises(TraceError) as info:
        read_agent_traces(path)
    assert str(info.value).startswith(f"{path}: ") and message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_bad_line_of_json_lines_is_named(tmp_path):
    path = tmp_path / "spans.jsonl"
    path.write_bytes(orjson.dumps(otlp(tool_trace())) + b"\n" + orjson.dumps(otlp([{**chat(TOOLS, "aa", None, 0, 1, 1, 1),
                                                                                    "endTimeUnixNano": "x"}])))  # fmt: skip
    with pytest.raises(TraceError, match=rf"^{path}:2: span 5 \(id aa\): expected endTimeUnixNano"):
        read_agent_traces(path)


def test_a_scenario_with_bad_spans_exits_2_with_one_line(cli, tmp_path):
    spans = write(tmp_path / "spans.json", _broken(lambda s: _attr(s, 1, "gen_ai.usage.input_tokens", None)))
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"target: {{url: 'http://127.0.0.1:9/v1', model: m}}\nload: {{rate: 1, duration: 1s}}\n"
                        f"workload:\n  agent: {{replay: {spans}}}\n")  # fmt: skip
    result = cli("validate", str(scenario))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    (line,) = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert "s.yaml:4: workload.agent:" in line and "span 2 (id 53995c3f42cd8ad9" in line
    assert "gen_ai.usage.input_tokens" in line
