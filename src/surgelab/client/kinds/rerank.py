"""rerank: a query and candidate documents, as vLLM, TEI-style and Jina/Cohere-compatible servers take them."""

from __future__ import annotations

from collections.abc import Callable

from surgelab.client.http1 import Response
from surgelab.client.kinds.base import KindContext, json_body, read_json
from surgelab.client.transport import HttpCall, ProtocolError
from surgelab.metrics.record import Outcome
from surgelab.workload.request import RequestSpec

__all__ = ["Rerank"]


class Rerank:
    def __init__(self, ctx: KindContext) -> None:
        self.ctx = ctx

    def call(self, spec: RequestSpec) -> HttpCall:
        body = {"model": self.ctx.target.model, "query": spec.prompt, "documents": list(spec.payload or ())}
        return HttpCall(self.ctx.url("/rerank"), json_body(self.ctx, body, spec))

    async def read(self, resp: Response, out: Outcome, on_first: Callable[[], None]) -> None:
        body = await read_json(resp, out, self.ctx, "rerank")
        try:
            results = body["results"]
            if not isinstance(results, list) or not all("relevance_score" in r and "index" in r for r in results):
                raise ProtocolError("rerank results need index and relevance_score")
            usage = body.get("usage") or {}
            total = usage.get("prompt_tokens", usage.get("total_tokens"))
            if total is not None:
                out.prompt_tokens, out.usage_source = int(total), "server"
            else:
                out.usage_source = "counted"
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"invalid rerank body: {type(exc).__name__}: {exc}") from None
        out.output_units = float(len(results))
        out.output_tokens = 0
