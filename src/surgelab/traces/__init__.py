"""Recorded traffic: trace and dataset files read into one typed :class:`Trace`, and replay windows.

Below the scenario: a replay shape or an empirical distribution reads its file through this
package when it is validated, and the workload and the load schedule take the same cached
:class:`Trace` (``read_trace_cached``) for lengths, prompts and send times.
"""

from surgelab.traces.formats import COLUMN_KEYS, FORMATS
from surgelab.traces.reader import read_trace, read_trace_cached
from surgelab.traces.replay import ReplayPlan, replay_indices, replay_offsets, replay_plan
from surgelab.traces.trace import RowProblem, Trace, TraceError

__all__ = [
    "COLUMN_KEYS", "FORMATS", "ReplayPlan", "RowProblem", "Trace", "TraceError",
    "read_trace", "read_trace_cached", "replay_indices", "replay_offsets", "replay_plan",
]  # fmt: skip
