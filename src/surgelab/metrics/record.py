"""The per-request record: one row per scheduled request, whatever became of it.

Times are integer nanoseconds on one monotonic clock, relative to the run's start (``t0``),
so they subtract exactly. A request that never reached a stage has a null there.
"""

from __future__ import annotations

import enum
from array import array
from dataclasses import dataclass, field

import pyarrow as pa

__all__ = ["State", "FAILED_STATES", "CUT_SHORT", "Outcome", "RECORD_SCHEMA"]


class State(str, enum.Enum):
    """The one final state of every scheduled request."""

    OK = "ok"
    HTTP_ERROR = "http_error"
    TIMEOUT = "timeout"
    CONNECTION_ERROR = "connection_error"
    PROTOCOL_ERROR = "protocol_error"
    CANCELLED = "cancelled"
    DROPPED = "dropped"
    LOST = "lost"  # planned for a worker that died: never sent, or its outcome died with the worker


FAILED_STATES = (State.HTTP_ERROR, State.TIMEOUT, State.CONNECTION_ERROR, State.PROTOCOL_ERROR)

# The error of a request the user cancelled without giving it any grace (a second Ctrl-C, or a stop with
# load.grace 0): the one cancellation that does not count against the target (analysis/outcomes.py).
CUT_SHORT = "cut short: the run was interrupted with no grace left for the response"


@dataclass(slots=True)
class Outcome:
    """What a client observed for one request; mutable while the request is under way.

    ``token_ns`` holds the arrival time of every content-bearing chunk in a flat C array
    (no per-token Python objects); inter-token latencies are its successive differences.
    """

    state: State = State.OK
    sent_ns: int | None = None
    first_byte_ns: int | None = None
    first_token_ns: int | None = None
    end_ns: int | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    usage_source: str = "none"  # "server", "counted" or "none"
    http_status: int | None = None
    error: str | None = None
    token_ns: array = field(default_factory=lambda: array("q"))
    text: str | None = None  # the answer, kept only when the spec asks (sessions)
    response_id: str | None = None  # the server's id of the answer (responses: a session's next turn names it)
    kind: str = ""  # the request kind (docs/kinds.md); set by the client
    input_units: float | None = None  # what the kind counts in: inputs, images, audio seconds, documents, steps
    output_units: float | None = None  # what it counts out: vectors, images, audio seconds, results, bytes
    step_ms: list[float] | None = None  # a flow's step durations, in order
    target: str = ""  # which named target answered (multi-target routing)
    attempts: int = 1  # sends made for this request: 1, or more under target.retry
    resends: int = 0  # sent again at once on a new connection: the reused keep-alive one had been closed
    intended_prompt_tokens: int | None = None  # the prompt length surgelab meant to send (prompt_tokens may be the server's)
    retry_after_s: float | None = None  # the last response's Retry-After (or retry-after-ms), in seconds
    connect_ms: float | None = None  # a new connection's TCP set-up (and a proxy's CONNECT tunnel); None when reused
    tls_ms: float | None = None  # a new connection's TLS handshake; None when reused or plain HTTP
    redirects: int = 0  # redirects followed (target.redirects)
    ratelimit_requests: int | None = None  # requests the provider still allows (x-ratelimit-remaining-requests, …)
    ratelimit_tokens: int | None = None  # tokens it still allows (the fewest of every token limit it named)
    ratelimit_reset_s: float | None = None  # longest wait until one of its limits resets
    tool_calls: int | None = None  # tool calls in the answer; None when the request offered no tools
    tool_names: str | None = None  # their function names, comma-separated, in order
    tool_args_bytes: int | None = None  # bytes of their arguments together
    first_tool_ns: int | None = None  # arrival of the first tool-call delta (or of the whole answer)
    calls: list | None = None  # the parsed tool calls (client/kinds/tool_calls.py), for the next request of a session

    def reset_for_retry(self) -> None:
        """Forget what the previous attempt observed (the first send time stays)."""
        self.state, self.first_byte_ns, self.first_token_ns, self.end_ns = State.OK, None, None, None
        self.output_tokens, self.usage_source, self.http_status, self.error = None, "none", None, None
        self.token_ns, self.text, self.output_units, self.retry_after_s = array("q"), None, None, None
        self.response_id = None
        self.tool_calls, self.tool_names, self.tool_args_bytes, self.first_tool_ns, self.calls = None, None, None, None, None
        self.ratelimit_requests, self.ratelimit_tokens, self.ratelimit_reset_s = None, None, None

    def fail(self, state: State, error: str, now_ns: int) -> None:
        self.state = state
        self.error = error[:500]
        self.end_ns = now_ns


RECORD_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("worker", pa.int16(), nullable=False),
        pa.field("user", pa.int32(), nullable=False),  # closed-loop user, -1 in open loop
        pa.field("phase", pa.string(), nullable=False),
        pa.field("request_class", pa.string(), nullable=False),
        pa.field("tier", pa.string(), nullable=False),
        pa.field("session", pa.int64(), nullable=False),  # multi-turn conversation, -1 when none
        pa.field("turn", pa.int16(), nullable=False),  # 1-based turn in its session, 0 when none
        pa.field("warmup", pa.bool_(), nullable=False),
        pa.field("state", pa.string(), nullable=False),
        pa.field("intended_ns", pa.int64(), nullable=False),
        pa.field("sent_ns", pa.int64()),
        pa.field("first_byte_ns", pa.int64()),
        pa.field("first_token_ns", pa.int64()),
        pa.field("end_ns", pa.int64()),
        pa.field("prompt_tokens", pa.int32()),
        pa.field("output_tokens", pa.int32()),
        pa.field("usage_source", pa.string(), nullable=False),
        pa.field("http_status", pa.int16()),
        pa.field("error", pa.string()),
        pa.field("itl_us", pa.list_(pa.int32()), nullable=False),  # gaps between content chunks
        pa.field("target", pa.string(), nullable=False),  # the named target it was sent to ("" with one target)
        pa.field("kind", pa.string(), nullable=False),  # request kind (docs/kinds.md); "" in records made before kinds
        pa.field("input_units", pa.float64()),  # inputs, images, audio seconds, documents, flow steps
        pa.field("output_units", pa.float64()),  # vectors, images, audio seconds, results, response bytes
        pa.field("step_ms", pa.list_(pa.float32())),  # a flow's step durations, in order
        pa.field("attempts", pa.int16()),  # sends made (1 without retries); null in runs recorded before retries
        pa.field("resends", pa.int16()),  # sends repeated on a new connection after a stale pooled one; null before
        pa.field("intended_prompt_tokens", pa.int32()),  # what surgelab meant to send; null before, or not counted
        pa.field("connect_ms", pa.float32()),  # a new connection's TCP (+ proxy tunnel) set-up; null when reused
        pa.field("tls_ms", pa.float32()),  # a new connection's TLS handshake; null when reused or plain HTTP
        pa.field("redirects", pa.int16()),  # redirects followed; null in runs recorded before
        pa.field("ratelimit_requests", pa.int32()),  # requests left in the provider's quota, as its headers said
        pa.field("ratelimit_tokens", pa.int64()),  # tokens left in its quota
        pa.field("ratelimit_reset_s", pa.float32()),  # longest wait until a limit resets
        pa.field("retry_after_s", pa.float32()),  # the wait it asked for (Retry-After)
        pa.field("tool_calls", pa.int16()),  # tool calls in the answer; null when no tools were offered
        pa.field("tool_names", pa.string()),  # their names, comma-separated
        pa.field("tool_args_bytes", pa.int32()),  # bytes of their arguments
        pa.field("first_tool_ns", pa.int64()),  # arrival of the first tool-call delta
        pa.field("step", pa.string()),  # an agentic task's step; null otherwise (docs/agents.md)
    ],
    metadata={"surgelab.record_version": "1"},
)
"""Column layout of ``records.parquet``; documented field by field in docs/records.md."""
