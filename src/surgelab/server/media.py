"""The embedded server's non-text routes: transcription, speech, image generation and rerank.

Each request is turned into engine work by its kind's cost (``surgelab.kinds``: a function of
``surgelab.engine.media``) and shares the one engine (batch, KV cache, step time) with chat and
completions, so a mixed load interferes as it would on one replica. Responses are shaped as OpenAI's (transcription, speech,
images) and vLLM's/Jina's (rerank) so their SDKs and clients accept them.
"""

from __future__ import annotations

import base64
import hashlib
import io
import math
import re
import time
import wave
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol, TypeVar

import numpy as np
import orjson
from aiohttp import BodyPartReader, web

from surgelab.engine import EngineRequest
from surgelab.engine.media import DEFAULT_DIFFUSION_STEPS
from surgelab.kinds import KINDS
from surgelab.server.driver import EngineDriver, TokenStream
from surgelab.server.protocol import ApiError
from surgelab.tokenizer import VOCABULARY, BuiltinTokenizer

__all__ = ["MediaRoutes", "Front", "SPEECH_SAMPLE_RATE"]

_TOKENIZER = BuiltinTokenizer()
SPEECH_SAMPLE_RATE = 24000
_SIZE = re.compile(r"^(\d{2,4})x(\d{2,4})$")


@dataclass(frozen=True)
class _Clip:
    seconds: float
    response_format: str
    language: str
    model: str | None = None


@dataclass(frozen=True)
class _ImageAsk:
    prompt_tokens: int
    n: int
    width: int
    height: int
    steps: int
    b64: bool


@dataclass(frozen=True)
class _Rerank:
    query_tokens: int
    documents: tuple[str, ...]
    doc_tokens: tuple[int, ...]
    top_n: int | None
    query: str


@dataclass(frozen=True)
class _SpeechAsk:
    words: int
    speed: float


T = TypeVar("T")


class Front(Protocol):
    """What the media routes need from the server (``InferenceServer``): its front door, its
    engine and fresh request numbers."""

    model: str
    driver: EngineDriver

    async def inference(
        self,
        request: web.Request,
        parse: Callable[[Any], T],
        serve: Callable[[web.Request, T], Awaitable[web.StreamResponse]],
        read: Callable[[web.Request], Awaitable[Any]] | None = None,
    ) -> web.StreamResponse: ...

    def submit(self, engine_request: EngineRequest) -> TokenStream: ...

    def next_id(self) -> int: ...


class MediaRoutes:
    """Registers the routes on the server's app and serves them through its front door."""

    def __init__(self, server: Front) -> None:
        self.server = server

    def register(self, app: web.Application) -> None:
        app.router.add_post("/v1/audio/transcriptions", self.transcriptions)
        app.router.add_post("/v1/audio/speech", self.speech)
        app.router.add_post("/v1/images/generations", self.images)
        for path in ("/v1/rerank", "/rerank", "/v2/rerank"):
            app.router.add_post(path, self.rerank)

    async def transcriptions(self, request: web.Request) -> web.StreamResponse:
        return await self.server.inference(request, lambda clip: clip, self._transcribe, read=_read_clip)

    async def speech(self, request: web.Request) -> web.StreamResponse:
        return await self.server.inference(request, _parse_speech, self._speak)

    async def images(self, request: web.Request) -> web.StreamResponse:
        return await self.server.inference(request, _parse_images, self._generate_images)

    async def rerank(self, request: web.Request) -> web.StreamResponse:
        return await self.server.inference(request, _parse_rerank, self._rerank)

    async def _finish(self, prefix: str, prompt_tokens: int, output_tokens: int) -> None:
        stream = self.server.submit(EngineRequest(f"{prefix}{self.server.next_id():x}", prompt_tokens, output_tokens))
        while not (await stream.receive())[1]:
            pass

    async def _transcribe(self, _request: web.Request, clip: _Clip) -> web.StreamResponse:
        encoder, n = KINDS["transcription"].hook("cost")(clip.seconds)
        await self._finish("t", encoder, n)
        text = " ".join(VOCABULARY[i] for i in np.random.default_rng(n).integers(0, len(VOCABULARY), size=n))
        if clip.response_format == "text":
            return web.Response(text=text, content_type="text/plain")
        body: dict[str, Any] = {"text": text, "usage": {"type": "duration", "seconds": math.ceil(clip.seconds)}}
        if clip.response_format == "verbose_json":
            body = {"task": "transcribe", "language": clip.language, "duration": clip.seconds, "text": text,
                    "segments": []}  # fmt: skip
        return _json(body)

    async def _speak(self, request: web.Request, ask: _SpeechAsk) -> web.StreamResponse:
        seconds, n = KINDS["speech"].hook("cost")(ask.words, ask.speed)
        rid = f"s{self.server.next_id():x}"
        stream = self.server.submit(EngineRequest(rid, ask.words, n))
        samples = round(seconds * SPEECH_SAMPLE_RATE)
        per_token = samples / n
        response = web.StreamResponse(headers={"Content-Type": "audio/wav"})
        response.content_length = 44 + 2 * samples
        await response.prepare(request)
        sent, written = 0, 0
        try:
            while sent < n:
                k, _ = await stream.receive()
                if not k:
                    continue
                sent += k
                upto = samples if sent >= n else round(sent * per_token)
                chunk = _tone(upto - written)
                await response.write((_wav_header(samples) if written == 0 else b"") + chunk)
                written = upto
        except BaseException:
            self.server.driver.cancel(rid)
            raise
        await response.write_eof()
        return response

    async def _generate_images(self, _request: web.Request, ask: _ImageAsk) -> web.StreamResponse:
        per_step = KINDS["image_generation"].hook("cost")(ask.width, ask.height, ask.n)
        for _ in range(ask.steps):  # each denoising step is a full pass over the latents
            await self._finish("g", per_step + ask.prompt_tokens, 1)
        png = _png(ask.width, ask.height)
        key = "b64_json" if ask.b64 else "url"
        value = png if ask.b64 else "data:image/png;base64," + png
        return _json({"created": int(time.time()), "data": [{key: value} for _ in range(ask.n)]})

    async def _rerank(self, _request: web.Request, ask: _Rerank) -> web.StreamResponse:
        total = ask.query_tokens * len(ask.documents) + sum(ask.doc_tokens)
        await self._finish("r", total, 1)
        scores = [_score(ask.query, d) for d in ask.documents]
        order = sorted(range(len(scores)), key=lambda i: -scores[i])[: ask.top_n or len(scores)]
        results = [{"index": i, "document": {"text": ask.documents[i]}, "relevance_score": scores[i]} for i in order]
        return _json({"id": f"rerank-{self.server.next_id():x}", "model": self.server.model,
                      "usage": {"total_tokens": total}, "results": results})  # fmt: skip


async def _read_clip(request: web.Request) -> _Clip:
    """The multipart form of /audio/transcriptions; the audio must be WAV (its length is read from it)."""
    if not request.content_type.startswith("multipart/"):
        raise ApiError(400, "audio/transcriptions takes multipart/form-data with a 'file' field")
    fields: dict[str, str] = {}
    data = None
    reader = await request.multipart()
    while (part := await reader.next()) is not None:
        if not isinstance(part, BodyPartReader):
            raise ApiError(400, "audio/transcriptions takes form fields, not a nested multipart part")
        if part.name == "file":
            data = await part.read()
        elif part.name:
            fields[part.name] = await part.text()
    if not data:
        raise ApiError(400, "missing the 'file' field", param="file")
    try:
        with wave.open(io.BytesIO(bytes(data)), "rb") as clip:
            seconds = clip.getnframes() / float(clip.getframerate())
    except (wave.Error, EOFError, ZeroDivisionError):
        raise ApiError(400, "the embedded server reads WAV audio only", param="file") from None
    fmt = fields.get("response_format", "json")
    if fmt not in ("json", "text", "verbose_json"):
        raise ApiError(400, "response_format must be json, text or verbose_json", param="response_format")
    return _Clip(seconds, fmt, fields.get("language", "en"), fields.get("model"))


def _parse_speech(body: Any) -> _SpeechAsk:
    text = body.get("input")
    if not isinstance(text, str) or not text.strip():
        raise ApiError(400, "'input' must be a non-empty string", param="input")
    fmt = body.get("response_format", "mp3")
    if fmt not in ("wav", "pcm", "mp3"):
        raise ApiError(400, "response_format must be wav (mp3 and pcm are answered as wav)", param="response_format")
    speed = body.get("speed", 1.0)
    if not isinstance(speed, (int, float)) or not 0.25 <= speed <= 4.0:
        raise ApiError(400, "'speed' must be between 0.25 and 4.0", param="speed")
    return _SpeechAsk(_TOKENIZER.count(text), float(speed))


def _parse_images(body: Any) -> _ImageAsk:
    prompt = body.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ApiError(400, "'prompt' must be a non-empty string", param="prompt")
    n = body.get("n", 1)
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 10:
        raise ApiError(400, "'n' must be an integer from 1 to 10", param="n")
    size = body.get("size") or "1024x1024"
    match = _SIZE.match(size if size != "auto" else "1024x1024") if isinstance(size, str) else None
    if match is None or not all(16 <= int(v) <= 4096 for v in match.groups()):
        raise ApiError(400, "'size' must be WIDTHxHEIGHT with sides from 16 to 4096, e.g. 1024x1024", param="size")
    steps = body.get("num_inference_steps", DEFAULT_DIFFUSION_STEPS)
    if not isinstance(steps, int) or not 1 <= steps <= 200:
        raise ApiError(400, "'num_inference_steps' must be an integer from 1 to 200", param="num_inference_steps")
    fmt = body.get("response_format") or "b64_json"
    if fmt not in ("b64_json", "url"):
        raise ApiError(400, "response_format must be b64_json or url", param="response_format")
    return _ImageAsk(_TOKENIZER.count(prompt), n, int(match[1]), int(match[2]), steps, fmt == "b64_json")


def _parse_rerank(body: Any) -> _Rerank:
    query = body.get("query")
    if not isinstance(query, str) or not query:
        raise ApiError(400, "'query' must be a non-empty string", param="query")
    docs = body.get("documents")
    if not isinstance(docs, list) or not docs:
        raise ApiError(400, "'documents' must be a non-empty array", param="documents")
    texts = []
    for doc in docs:
        text = doc.get("text") if isinstance(doc, dict) else doc
        if not isinstance(text, str) or not text:
            raise ApiError(400, "each document must be a string or {text: string}", param="documents")
        texts.append(text)
    top_n = body.get("top_n")
    if top_n is not None and (not isinstance(top_n, int) or top_n < 1):
        raise ApiError(400, "'top_n' must be an integer >= 1", param="top_n")
    return _Rerank(_TOKENIZER.count(query), tuple(texts), tuple(_TOKENIZER.count(t) for t in texts), top_n, query)


def _score(query: str, document: str) -> float:
    digest = hashlib.blake2b((query + "\x00" + document).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2**64


def _wav_header(samples: int) -> bytes:
    size = 2 * samples
    return (b"RIFF" + (36 + size).to_bytes(4, "little") + b"WAVEfmt " + (16).to_bytes(4, "little")
            + (1).to_bytes(2, "little") + (1).to_bytes(2, "little") + SPEECH_SAMPLE_RATE.to_bytes(4, "little")
            + (2 * SPEECH_SAMPLE_RATE).to_bytes(4, "little") + (2).to_bytes(2, "little") + (16).to_bytes(2, "little")
            + b"data" + size.to_bytes(4, "little"))  # fmt: skip


@lru_cache(maxsize=1)
def _second_of_tone() -> bytes:
    t = np.arange(SPEECH_SAMPLE_RATE) / SPEECH_SAMPLE_RATE
    return (np.sin(2 * np.pi * 220 * t) * 8000).astype("<i2").tobytes()


def _tone(samples: int) -> bytes:
    second = _second_of_tone()
    whole, rest = divmod(2 * samples, len(second))
    return second * whole + second[:rest]


@lru_cache(maxsize=16)
def _png(width: int, height: int) -> str:
    from PIL import Image  # heavy: Pillow only when an image is generated

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (90, 140, 200)).save(buffer, format="PNG", compress_level=1)
    return base64.b64encode(buffer.getvalue()).decode()


def _json(body: Any) -> web.Response:
    return web.Response(body=orjson.dumps(body), content_type="application/json")

