"""image_generation: ``/images/generations`` with a size and a count; counted in images."""

from __future__ import annotations

from collections.abc import Callable

from surgelab.client.http1 import Response
from surgelab.client.kinds.base import KindContext, json_body, read_json
from surgelab.client.transport import HttpCall, ProtocolError
from surgelab.metrics.record import Outcome
from surgelab.workload.request import RequestSpec

__all__ = ["ImageGeneration"]


class ImageGeneration:
    def __init__(self, ctx: KindContext) -> None:
        self.ctx = ctx

    def call(self, spec: RequestSpec) -> HttpCall:
        ask = spec.payload or {"n": 1, "size": "512x512"}
        body = {"model": self.ctx.target.model, "prompt": spec.prompt, "n": ask["n"], "size": ask["size"],
                "response_format": "b64_json"}  # fmt: skip
        return HttpCall(self.ctx.url("/images/generations"), json_body(self.ctx, body, spec))

    async def read(self, resp: Response, out: Outcome, on_first: Callable[[], None]) -> None:
        body = await read_json(resp, out, self.ctx, "image generation")
        try:
            images = body["data"]
            if not isinstance(images, list) or not images:
                raise ProtocolError("image generation response without images")
            if not all(isinstance(i, dict) and (i.get("b64_json") or i.get("url")) for i in images):
                raise ProtocolError("an image has neither b64_json nor url")
        except (KeyError, TypeError) as exc:
            raise ProtocolError(f"invalid image generation body: {type(exc).__name__}: {exc}") from None
        out.output_units = float(len(images))
        out.output_tokens = 0
