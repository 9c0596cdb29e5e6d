"""One simulated request: who it is (the record's meta), what it asks, what became of it."""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, Any

from surgelab.metrics.record import State
from surgelab.metrics.store import MetaRow
from surgelab.workload.request import RequestSpec

if TYPE_CHECKING:
    from surgelab.sim.replica import Replica
    from surgelab.workload.prompts import Synthetic

__all__ = ["SimRequest", "SimOutcome", "SECOND"]

SECOND = 1_000_000_000


class SimOutcome:
    """The part of ``Outcome`` a simulated client observes, as a plain slotted class (cheaper to make).

    Its fields are ``Outcome``'s of the same name; every other ``Outcome`` field keeps its
    default in a simulation, and the recorder writes those columns from the defaults.
    """

    __slots__ = ("state", "sent_ns", "first_byte_ns", "first_token_ns", "end_ns", "prompt_tokens", "output_tokens",
                 "usage_source", "http_status", "error", "token_ns")  # fmt: skip
    first_byte_ns: int | None
    first_token_ns: int | None
    end_ns: int | None
    prompt_tokens: int | None
    output_tokens: int | None
    http_status: int | None

    def __init__(self, sent_ns: int | None = None, state: State = State.OK, error: str | None = None) -> None:
        self.state, self.sent_ns, self.error = state, sent_ns, error
        self.first_byte_ns = self.first_token_ns = self.end_ns = self.prompt_tokens = self.output_tokens = None
        self.http_status = None
        self.usage_source = "none"
        self.token_ns = array("q")

    def fail(self, state: State, error: str, now_ns: int) -> None:
        """As ``Outcome.fail``."""
        self.state = state
        self.error = error[:500]
        self.end_ns = now_ns


class SimRequest:
    """A plain class with slots: a simulation makes one per request, and a dataclass's ``__init__`` costs more."""

    __slots__ = ("rid", "meta", "spec", "output_tokens", "priority", "outcome", "replica", "queued", "done",
                 "cache_key", "first_token_deadline", "total_deadline", "context", "hashes", "tokens", "stretch",
                 "place", "back", "made")  # fmt: skip

    def __init__(self, rid: str, meta: MetaRow, spec: RequestSpec, output_tokens: int, first_token_deadline: int = 0,
                 total_deadline: int = 0, context: Any = None, sent_ns: int | None = None,
                 made: Synthetic | None = None) -> None:  # fmt: skip
        self.rid, self.meta, self.spec, self.output_tokens = rid, meta, spec, output_tokens
        self.priority = 0
        self.outcome = SimOutcome(sent_ns)
        self.replica: Replica | None = None
        self.queued = self.done = False
        self.cache_key: int | None = None
        self.first_token_deadline, self.total_deadline = first_token_deadline, total_deadline
        self.context = context  # what the traffic source needs to carry on (session, user)
        self.hashes: tuple[int, ...] = ()  # prefix-cache block hashes (cache.prefix)
        self.tokens = 0
        self.stretch = -1  # engine step of the first token of the stretch under way (FastEngineBackend); -1: none
        self.place = 0  # its place in the engine's batch while the stretch lasts
        self.back = 0  # the network's way back from its replica's region (ns): its times are shifted by it at the end
        self.made = made  # how its prompt was made, where its text was not built for it (prefix hashing)

    @property
    def intended(self) -> int:
        return self.meta.intended_ns

    def token(self, now: int, n: int = 1) -> bool:
        """Receive ``n`` tokens at ``now``; False when the client has timed out instead."""
        out = self.outcome
        sent = out.sent_ns
        assert sent is not None  # a request the engine sees was sent
        if out.first_token_ns is None:
            if now - sent > self.first_token_deadline:
                out.fail(State.TIMEOUT, "timed out waiting for the first token", sent + self.first_token_deadline)
                return False
            out.first_token_ns = now
        elif now - sent > self.total_deadline:
            out.fail(State.TIMEOUT, "timed out before the response ended", sent + self.total_deadline)
            return False
        append = out.token_ns.append
        for _ in range(n):
            append(now)
        self.tokens += n
        return True

    def succeed(self, now: int) -> None:
        out = self.outcome
        out.end_ns = now
        out.prompt_tokens = self.spec.prompt_tokens
        out.output_tokens = self.tokens
        out.usage_source = "server"
        out.http_status = 200
