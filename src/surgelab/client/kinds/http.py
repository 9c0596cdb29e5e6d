"""http: any JSON-over-HTTP inference API from a template; response time only.

The path is taken from the target URL's origin (``http://host:port``) unless it is a full
URL, so ``url: http://host:8000/v1`` and ``path: /v2/models/{model}/infer`` hit
``http://host:8000/v2/models/<model>/infer``. Any 2xx response is a success; its body is
read to the end (that is the end time) but not interpreted.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

import orjson

from surgelab.client.http1 import Response
from surgelab.client.kinds.base import KindContext
from surgelab.client.transport import HttpCall
from surgelab.metrics.record import Outcome, State
from surgelab.workload.kinds import fill
from surgelab.workload.request import RequestSpec

__all__ = ["Http"]


class Http:
    def __init__(self, ctx: KindContext) -> None:
        self.ctx = ctx
        parts = urlsplit(ctx.target.base_url)
        self._origin = f"{parts.scheme}://{parts.netloc}"

    def call(self, spec: RequestSpec) -> HttpCall:
        method, path, body, headers, values = spec.payload
        values = {**values, "model": self.ctx.target.model}
        path = fill(path, values)
        url = path if "://" in path else self._origin + ("" if path.startswith("/") else "/") + path
        data = None if body is None else orjson.dumps(fill(body, values))
        return HttpCall(url, data, method=method, headers=headers)

    async def read(self, resp: Response, out: Outcome, on_first: Callable[[], None]) -> None:
        size = 0
        async for chunk in resp.content.iter_any():
            size += len(chunk)
        out.end_ns = self.ctx.clock()
        out.output_units = float(size)  # response bytes
        out.state = State.OK
