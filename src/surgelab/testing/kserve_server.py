"""A small server speaking the KServe / Triton v2 inference protocol, for tests of the http kind.

Routes (the Open Inference Protocol, https://kserve.github.io/website/latest/modelserving/data_plane/v2_protocol/):

    GET  /v2/health/ready                    200 when ready
    GET  /v2/models/{name}                   model metadata (inputs and outputs)
    POST /v2/models/{name}/infer             {"inputs": [{name, shape, datatype, data}]} → {"outputs": [...]}

An infer request is checked as Triton checks it: every input needs a name, a shape, a
datatype and data whose element count is the shape's product; a bad one answers 400
``{"error": ...}``; an unknown model 404. Each request takes ``--delay`` seconds. The answer
echoes the text input upper-cased as a BYTES tensor ``text_output``. ``GET /stats`` tells how
many infer requests arrived, how many were rejected, and the last request's body.

Run it with ``python -m surgelab.testing.kserve_server --port 0 --model NAME``; it prints
``listening on http://127.0.0.1:PORT`` once it accepts connections.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import orjson
from aiohttp import web

from surgelab.testing.serving import run_until_interrupted, serve_app, server_argument_parser

__all__ = ["make_app", "serve"]

_DATATYPES = {"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32",
              "FP64", "BYTES"}  # fmt: skip


def _flat(data: Any) -> list:
    return [x for item in data for x in _flat(item)] if isinstance(data, list) else [data]


def _check(body: Any) -> str | None:
    """What is wrong with an infer request body, or None."""
    if not isinstance(body, dict) or not isinstance(body.get("inputs"), list) or not body["inputs"]:
        return "request must be an object with a non-empty 'inputs' array"
    for i, tensor in enumerate(body["inputs"]):
        if not isinstance(tensor, dict) or not all(k in tensor for k in ("name", "shape", "datatype", "data")):
            return f"inputs[{i}] needs name, shape, datatype and data"
        if tensor["datatype"] not in _DATATYPES:
            return f"inputs[{i}]: unknown datatype {tensor['datatype']!r}"
        shape = tensor["shape"]
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            return f"inputs[{i}]: shape must be a list of non-negative integers"
        if len(_flat(tensor["data"])) != math.prod(shape):
            return f"inputs[{i}]: {len(_flat(tensor['data']))} elements for shape {shape}"
    return None


def make_app(model: str, delay: float) -> web.Application:
    stats: dict[str, Any] = {"infer": 0, "rejected": 0, "last": None}

    async def infer(request: web.Request) -> web.Response:
        if request.match_info["name"] != model:
            return web.json_response({"error": f"unknown model {request.match_info['name']!r}"}, status=404)
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError as exc:
            stats["rejected"] += 1
            return web.json_response({"error": f"invalid JSON: {exc}"}, status=400)
        problem = _check(body)
        if problem:
            stats["rejected"] += 1
            return web.json_response({"error": problem}, status=400)
        stats["infer"] += 1
        stats["last"] = body
        if delay:
            await asyncio.sleep(delay)
        text = next((t for t in body["inputs"] if t["datatype"] == "BYTES"), body["inputs"][0])
        values = [str(v).upper() for v in _flat(text["data"])]
        outputs = [{"name": "text_output", "datatype": "BYTES", "shape": [len(values)], "data": values}]
        answer = {"model_name": model, "model_version": "1", "outputs": outputs}
        if "id" in body:
            answer["id"] = body["id"]
        return web.Response(body=orjson.dumps(answer), content_type="application/json")

    async def metadata(request: web.Request) -> web.Response:
        if request.match_info["name"] != model:
            return web.json_response({"error": "unknown model"}, status=404)
        return web.json_response({"name": model, "versions": ["1"], "platform": "surgelab",
                                  "inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [-1]}],
                                  "outputs": [{"name": "text_output", "datatype": "BYTES", "shape": [-1]}]})  # fmt: skip

    async def ready(request: web.Request) -> web.Response:
        return web.Response(text="")

    async def counted(request: web.Request) -> web.Response:
        return web.json_response(stats)

    app = web.Application()  # handlers are coroutines: aiohttp deprecates bare functions
    app.router.add_post("/v2/models/{name}/infer", infer)
    app.router.add_get("/v2/models/{name}", metadata)
    app.router.add_get("/v2/health/ready", ready)
    app.router.add_get("/stats", counted)
    return app


async def serve(host: str, port: int, model: str, delay: float) -> None:
    await serve_app(make_app(model, delay), host, port)


def main(argv: list[str] | None = None) -> None:
    parser = server_argument_parser(__doc__)
    parser.add_argument("--model", default="text")
    parser.add_argument("--delay", type=float, default=0.01, help="seconds each infer request takes")
    args = parser.parse_args(argv)
    run_until_interrupted(serve(args.host, args.port, args.model, args.delay))


if __name__ == "__main__":
    main()
