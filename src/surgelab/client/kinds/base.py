"""The interface every request kind implements, and what kinds share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from surgelab.client.http1 import Response
from surgelab.client.transport import HttpCall, ProtocolError, read_body
from surgelab.metrics.record import Outcome, State
from surgelab.scenario.model import Target
from surgelab.tokenizer import Tokenizer
from surgelab.workload.request import RequestSpec

__all__ = ["Kind", "KindContext", "json_body", "read_json"]


@dataclass(frozen=True)
class KindContext:
    """What a kind needs to build and read requests: the target, the run clock, the tokenizer."""

    target: Target
    clock: Callable[[], int]
    tokenizer: Tokenizer

    def url(self, path: str) -> str:
        return self.target.base_url + path


class Kind(Protocol):
    """One request kind's adapter: the HTTP call for a spec, and how its response fills the outcome
    (what else a kind is — streamed or not, its units — its spec in ``surgelab.kinds`` says)."""

    def call(self, spec: RequestSpec) -> HttpCall: ...

    async def read(self, resp: Response, out: Outcome, on_first: Callable[[], None]) -> None: ...


def json_body(ctx: KindContext, body: dict[str, Any], spec: RequestSpec) -> bytes:
    """The body with the target's and the class's extra fields merged in."""
    body.update(ctx.target.extra_body)
    body.update(spec.extra)
    return orjson.dumps(body)


async def read_json(resp: Response, out: Outcome, ctx: KindContext, what: str) -> Any:
    """A whole JSON response; the end time is when its last byte arrived."""
    raw = await read_body(resp, ctx.target.max_response_bytes)
    out.end_ns = ctx.clock()
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError(f"invalid {what} body: {exc}") from None
    if isinstance(body, dict) and "error" in body and len(body) == 1:
        raise ProtocolError(f"error body with status {resp.status}: {str(body['error'])[:300]}")
    out.state = State.OK
    return body
