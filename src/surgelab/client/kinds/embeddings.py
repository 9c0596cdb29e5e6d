"""embeddings: a batch of inputs in one request; counted in inputs and input tokens."""

from __future__ import annotations

from collections.abc import Callable

from surgelab.client.http1 import Response
from surgelab.client.kinds.base import KindContext, json_body, read_json
from surgelab.client.transport import HttpCall, ProtocolError
from surgelab.metrics.record import Outcome
from surgelab.workload.request import RequestSpec

__all__ = ["Embeddings"]


class Embeddings:
    """Embeddings arrive whole: no first token, no output tokens; E2E is the latency."""

    def __init__(self, ctx: KindContext) -> None:
        self.ctx = ctx

    def body(self, spec: RequestSpec) -> dict:
        inputs = spec.payload
        return {"model": self.ctx.target.model, "input": list(inputs) if inputs and len(inputs) > 1 else spec.prompt}

    def call(self, spec: RequestSpec) -> HttpCall:
        return HttpCall(self.ctx.url("/embeddings"), json_body(self.ctx, self.body(spec), spec))

    async def read(self, resp: Response, out: Outcome, on_first: Callable[[], None]) -> None:
        body = await read_json(resp, out, self.ctx, "embeddings")
        try:
            vectors = body["data"]
            if not isinstance(vectors, list) or not vectors:
                raise ProtocolError("embeddings response without vectors")
            usage = body.get("usage") or {}
            if usage.get("prompt_tokens") is not None:
                out.prompt_tokens, out.usage_source = int(usage["prompt_tokens"]), "server"
            else:
                out.usage_source = "counted"
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"invalid embeddings body: {type(exc).__name__}: {exc}") from None
        out.output_tokens = 0
        out.output_units = float(len(vectors))
