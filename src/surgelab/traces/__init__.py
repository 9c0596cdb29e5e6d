"""Recorded traffic: trace and dataset files read into one typed :class:`Trace`, and replay windows.

Below the scenario: a replay shape or an empirical distribution reads its file through this
package when it is validated, and the workload and the load schedule take the same cached
:class:`Trace` (``read_trace_cached``) for lengths, prompts and send times. An agent replay
reads recorded tasks (OpenTelemetry GenAI spans, :func:`read_agent_traces`) the same way.
"""

from surgelab.traces.formats import COLUMN_KEYS, FORMATS
from surgelab.traces.otel_agents import AgentTrace, AgentTraces, read_agent_traces
from surgelab.traces.reader import read_trace, read_trace_cached
from surgelab.traces.replay import ReplayPlan, replay_indices, replay_offsets, replay_plan
from surgelab.traces.trace import RowProblem, Trace, TraceError

__all__ = [
    "AgentTrace", "AgentTraces", "COLUMN_KEYS", "FORMATS", "ReplayPlan", "RowProblem", "Trace", "TraceError",
    "read_agent_traces", "read_trace", "read_trace_cached", "replay_indices", "replay_offsets", "replay_plan",
]  # fmt: skip
