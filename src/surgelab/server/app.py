"""The aiohttp application: OpenAI-compatible routes over one engine driven in wall time."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import numpy as np
import orjson
from aiohttp import web

from surgelab.engine import Engine, EngineRequest, RequestRejected, prefix_block_hashes
from surgelab.exposure import token_matches
from surgelab.server.config import ServerConfig
from surgelab.server.conversations import Conversations
from surgelab.server.driver import EngineDriver, TokenStream
from surgelab.server.faults import FaultInjector
from surgelab.server.media import MediaRoutes
from surgelab.server.metrics import CONTENT_TYPE, ServerMetrics
from surgelab.server.protocol import (
    ApiError,
    EmbeddingInput,
    Generation,
    parse_body,
    parse_chat,
    parse_completion,
    parse_embeddings,
    parse_messages,
    parse_tokenize,
    plan_output,
)
from surgelab.server.responses import Completion, usage
from surgelab.server.tool_answers import tool_answer
from surgelab.server.typed_events import MessagesAnswer, ResponsesAnswer
from surgelab.tokenizer import VOCABULARY, BuiltinTokenizer

__all__ = ["InferenceServer", "build_app"]

_TOKENIZER = BuiltinTokenizer()

_SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_WORDS = tuple(" " + w for w in VOCABULARY)
T = TypeVar("T")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def build_app(config: ServerConfig) -> web.Application:
    """A ready-to-run application; the engine starts with the app and stops with it."""
    return InferenceServer(config).app


def _token_required(token: str) -> Any:
    """A server bound beyond loopback answers only callers that bring its token."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        given = request.headers.get("Authorization") or request.headers.get("x-api-key")  # x-api-key: Anthropic's
        if request.path != "/health" and not token_matches(given, token):
            return web.json_response({"error": {"message": "missing or wrong token", "type": "unauthorized"}}, status=401)
        return await handler(request)

    return check


@web.middleware
async def _api_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as exc:
        body = exc.anthropic_body() if request.path == "/v1/messages" else exc.body()
        return web.Response(status=exc.status, body=body, headers=exc.headers, content_type="application/json")


class InferenceServer:
    """Routes, in-flight accounting and token streaming for one engine replica."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.model = config.served_model
        self.metrics = ServerMetrics(self.model)
        self.engine = Engine(config.profile, prefix_caching=config.prefix_caching)
        self.driver = EngineDriver(self.engine, on_step=self.metrics.observe_step)
        self.faults = FaultInjector(config.faults, config.seed)
        self.conversations = Conversations()
        self.inflight = 0
        self._ids = itertools.count()
        self._id_prefix = secrets.token_hex(4)  # response ids unique across restarts
        middlewares = [_token_required(config.token)] if config.token else []
        app = web.Application(middlewares=[*middlewares, _api_errors], client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/embeddings", self.embeddings)
        app.router.add_post("/v1/responses", self.responses)
        app.router.add_post("/v1/messages", self.messages)
        MediaRoutes(self).register(app)
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/tokenize", self.tokenize)
        app.router.add_get("/health", self.health)
        app.router.add_get("/metrics", self.prometheus)
        app.on_response_prepare.append(self._echo_session)
        app.on_startup.append(self._start)
        app.on_cleanup.append(self._stop)
        self.app = app

    async def _start(self, _app: web.Application) -> None:
        self.driver.start()
        self.faults.arm(on_stall=self.driver.freeze)

    async def _stop(self, _app: web.Application) -> None:
        await self.driver.close()

    async def _echo_session(self, request: web.Request, response: web.StreamResponse) -> None:
        """The session header, as the client sent it, back on the answer: a test or a proxy sees what arrived."""
        name = self.config.session_header
        value = request.headers.get(name) if name else None
        if value is not None:
            response.headers[name] = value
            self.metrics.session_requests.inc()

    async def health(self, _request: web.Request) -> web.Response:
        await self.faults.hang_if_stalled()
        return web.Response(status=200)

    async def prometheus(self, _request: web.Request) -> web.Response:
        await self.faults.hang_if_stalled()
        return web.Response(body=self.metrics.render(self.engine), headers={"Content-Type": CONTENT_TYPE})

    async def models(self, _request: web.Request) -> web.Response:
        await self.faults.hang_if_stalled()
        card = {
            "id": self.model,
            "object": "model",
            "created": 0,
            "owned_by": "surgelab",
            "max_model_len": self.config.profile.max_model_len,
        }
        return _json({"object": "list", "data": [card]})

    async def tokenize(self, request: web.Request) -> web.Response:
        """vLLM's /tokenize: how this server counts a prompt (clients calibrate prompt lengths with it)."""
        body = parse_body(await request.read())
        return _json(parse_tokenize(body, self.config.profile.max_model_len))

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self.inference(request, parse_chat, self._generate)

    def _calls_tool(self, gen: Generation, rng: np.random.Generator) -> bool:
        """Whether the answer calls a tool: offered one and not just given a result, for ``tool_call_fraction`` of them."""
        return bool(gen.tools) and not gen.after_tool and float(rng.random()) < self.config.tool_call_fraction

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self.inference(request, parse_completion, self._generate)

    async def responses(self, request: web.Request) -> web.StreamResponse:
        return await self.inference(request, self.conversations.resume, self._answer_responses)

    async def messages(self, request: web.Request) -> web.StreamResponse:
        return await self.inference(request, parse_messages, self._answer_messages)

    async def _answer_responses(self, request: web.Request, gen: Generation) -> web.StreamResponse:
        def render(rid: str) -> ResponsesAnswer:
            return ResponsesAnswer(self._id_prefix + rid, self.model, gen.max_tokens)

        render.api = "responses"  # type: ignore[attr-defined]

        return await self._generate(request, gen, render, keep=self.conversations.keep)

    async def _answer_messages(self, request: web.Request, gen: Generation) -> web.StreamResponse:
        def render(rid: str) -> MessagesAnswer:
            return MessagesAnswer(self._id_prefix + rid, self.model, gen.prompt_tokens)

        render.api = "messages"  # type: ignore[attr-defined]
        return await self._generate(request, gen, render)

    async def embeddings(self, request: web.Request) -> web.StreamResponse:
        return await self.inference(request, parse_embeddings, self._embed)

    async def inference(
        self,
        request: web.Request,
        parse: Callable[[Any], T],
        serve: Callable[[web.Request, T], Awaitable[web.StreamResponse]],
        read: Callable[[web.Request], Awaitable[Any]] | None = None,
    ) -> web.StreamResponse:
        """The front door every inference request passes, in the order the faults doc states.

        ``read`` takes the body (default: a JSON object); ``parse`` turns it into the request.
        """
        await self.faults.hang_if_stalled()
        raw = await read(request) if read is not None else parse_body(await request.read())
        self._check_model(raw.get("model") if isinstance(raw, Mapping) else getattr(raw, "model", None))
        parsed = parse(raw)
        self.inflight += 1  # no await between counting and checking: bursts see true counts
        try:
            self.faults.check_admission(self.inflight)
            await self.faults.delay()
            if self.config.profile.request_overhead_s:  # the front end's own time, before the engine sees it
                await asyncio.sleep(self.config.profile.request_overhead_s)
            return await serve(request, parsed)
        finally:
            self.inflight -= 1

    async def _generate(
        self,
        request: web.Request,
        gen: Generation,
        render: Callable[[str], Any] | None = None,
        keep: Callable[[str, Generation, str], None] | None = None,
    ) -> web.StreamResponse:
        """Generate and answer ``gen``: as chat or completion chunks, or in ``render``'s words (an
        answer of ``server/typed_events.py`` for request id ``rid``); ``keep`` is told each answer."""
        loop = asyncio.get_running_loop()
        arrival = loop.time()
        number = next(self._ids)
        rng = np.random.default_rng([self.config.seed, number if gen.seed is None else gen.seed])
        context_left = self.config.profile.max_model_len - gen.prompt_tokens
        n, finish = plan_output(gen, context_left, self.config.typical_output_tokens, rng)
        words = [_WORDS[i] for i in rng.integers(0, len(_WORDS), size=n)]
        rid = f"{number:x}"
        stream = self.submit(EngineRequest(rid, gen.prompt_tokens, n, self._hashes(gen)))
        if gen.chat and self._calls_tool(gen, rng):
            completion = tool_answer(getattr(render, "api", "chat"), self._id_prefix + rid, self.model, gen)
        else:
            completion = render(rid) if render else Completion(self._id_prefix + rid, self.model, gen.chat)
        response: web.StreamResponse | None = None
        sent, first_at = 0, arrival
        try:
            if gen.stream:
                response = web.StreamResponse(headers=_SSE_HEADERS)
                await response.prepare(request)
                opening = completion.opening()
                if opening:
                    await response.write(opening)
            while sent < n:
                k, _ = await stream.receive()
                if k and sent == 0:
                    first_at = loop.time()
                if response is not None and k:
                    batch = words[sent : sent + k]
                    if sent + k == n:
                        data = completion.tokens(batch[:-1], first=sent == 0) + completion.last_token(
                            batch[-1], first=sent == 0 and k == 1, finish_reason=finish
                        )
                    else:
                        data = completion.tokens(batch, first=sent == 0)
                    await response.write(data)
                sent += k
        except ConnectionResetError:  # the client went away mid-stream
            self.driver.cancel(rid)
            return response or web.Response(status=499)
        except BaseException:
            self.driver.cancel(rid)
            raise
        self.metrics.observe_finished(finish, first_at - arrival, loop.time() - arrival, n)
        totals = usage(gen.prompt_tokens, n)
        text = "".join(words)
        if keep is not None:  # a tool call is kept as its arguments, what the model said
            keep(completion.id, gen, completion.said(text) if hasattr(completion, "said") else text)
        if response is None:
            return _raw_json(completion.whole(text, finish, totals))
        await response.write(completion.closing(text, finish, totals, gen.include_usage))
        await response.write_eof()
        return response

    async def _embed(self, _request: web.Request, inputs: EmbeddingInput) -> web.StreamResponse:
        """Each input is its own prompt, checked against the context and prefilled on its own (as vLLM
        does): a batch's inputs share the engine's steps, so it still costs the sum of their prefills."""
        limit = self.config.profile.max_model_len
        for index, count in enumerate(inputs.token_counts):
            if count > limit:
                raise ApiError(
                    400,
                    f"This model's maximum context length is {limit} tokens. However, you requested "
                    f"{count} tokens in the input for embedding generation. Please reduce the length of the input.",
                    param=f"input[{index}]" if len(inputs.token_counts) > 1 else "input",
                    code="context_length_exceeded",
                )
        rid = f"e{next(self._ids):x}"
        # the engine samples one token after a prefill; an input of exactly the context prefills one token less
        requests = [EngineRequest(f"{rid}-{i}", min(n, limit - 1), 1) for i, n in enumerate(inputs.token_counts)]
        try:
            streams = [self.submit(request) for request in requests]
            await asyncio.gather(*(_finished(stream) for stream in streams))
        except BaseException:
            for request in requests:
                self.driver.cancel(request.request_id)
            raise
        data = []
        for index, text in enumerate(inputs.texts):
            vector = _embedding(text, self.config.embedding_dim)
            encoded = base64.b64encode(vector.tobytes()).decode() if inputs.base64 else vector.tolist()
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        total = sum(inputs.token_counts)
        return _json(
            {
                "object": "list",
                "data": data,
                "model": self.model,
                "usage": {"prompt_tokens": total, "total_tokens": total},
            }
        )

    def _check_model(self, model: Any) -> None:
        """vLLM's answer to a model it does not serve: 404, ``The model `x` does not exist.`` (no model: the served one)."""
        if model is None or model == self.model:
            return
        if not isinstance(model, str):
            raise ApiError(400, "'model' must be a string", param="model")
        raise ApiError(404, f"The model `{model}` does not exist.", type="NotFoundError", param="model", code=404)

    def next_id(self) -> int:
        """A fresh request number (response and engine ids are made from it)."""
        return next(self._ids)

    def submit(self, engine_request: EngineRequest) -> TokenStream:
        """Hand a request to the engine; a prompt beyond the context is a 400 for the client."""
        try:
            stream = self.driver.submit(engine_request)
        except RequestRejected as exc:
            raise ApiError(400, str(exc), code="context_length_exceeded") from None
        self.metrics.observe_admitted(engine_request.prompt_tokens)
        return stream

    def _hashes(self, gen: Generation) -> tuple[int, ...]:
        """Prefix-cache keys over exactly the tokens that were counted."""
        if not self.config.prefix_caching:
            return ()
        pieces = [piece for part in gen.prompt_parts for piece in _TOKENIZER.pieces(part)]
        return prefix_block_hashes(pieces, self.config.profile.block_size)


async def _finished(stream: TokenStream) -> None:
    while not (await stream.receive())[1]:
        pass


def _embedding(text: str, dim: int) -> np.ndarray:
    """A unit vector determined by the text alone."""
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
    vector = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return vector / np.float32(np.linalg.norm(vector))


def _json(body: Any) -> web.Response:
    return _raw_json(orjson.dumps(body))


def _raw_json(data: bytes) -> web.Response:
    return web.Response(body=data, content_type="application/json")
