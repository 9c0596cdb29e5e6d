"""transcription (audio in, text out, multipart) and speech (text in, audio out, streamed bytes)."""

from __future__ import annotations

from collections.abc import Callable

import orjson

from surgelab.client.http1 import Response
from surgelab.client.kinds.base import KindContext, json_body, read_json
from surgelab.client.transport import HttpCall, ProtocolError, multipart
from surgelab.metrics.record import Outcome, State
from surgelab.workload.request import RequestSpec

__all__ = ["Transcription", "Speech", "WAV_HEADER_BYTES"]

WAV_HEADER_BYTES = 44  # a canonical PCM WAV header


class Transcription:
    """``/audio/transcriptions`` as multipart form data; the text's tokens are the output."""

    def __init__(self, ctx: KindContext) -> None:
        self.ctx = ctx

    def call(self, spec: RequestSpec) -> HttpCall:
        data, filename, _seconds = spec.payload
        fields: dict[str, str | tuple[bytes, str, str]] = {
            "file": (data, filename, "audio/wav"),
            "model": self.ctx.target.model,
            "response_format": "json",
        }
        for name, value in {**self.ctx.target.extra_body, **spec.extra}.items():
            fields[name] = value if isinstance(value, str) else orjson.dumps(value).decode()
        body, content_type = multipart(fields)
        return HttpCall(self.ctx.url("/audio/transcriptions"), body, headers={"Content-Type": content_type})

    async def read(self, resp: Response, out: Outcome, on_first: Callable[[], None]) -> None:
        body = await read_json(resp, out, self.ctx, "transcription")
        try:
            text = body["text"]
            if not isinstance(text, str):
                raise TypeError("text is not a string")
        except (KeyError, TypeError) as exc:
            raise ProtocolError(f"invalid transcription body: {type(exc).__name__}: {exc}") from None
        out.output_tokens = self.ctx.tokenizer.count(text)
        out.usage_source = "counted"


class Speech:
    """``/audio/speech``: the first audio byte is the 'first token'; audio seconds come from the bytes.

    Asks for WAV (16-bit mono PCM); the sample rate is read from the WAV header, so any
    server's rate is measured correctly.
    """

    def __init__(self, ctx: KindContext) -> None:
        self.ctx = ctx

    def call(self, spec: RequestSpec) -> HttpCall:
        body = {"model": self.ctx.target.model, "input": spec.prompt, "voice": "alloy", "response_format": "wav"}
        return HttpCall(self.ctx.url("/audio/speech"), json_body(self.ctx, body, spec))

    async def read(self, resp: Response, out: Outcome, on_first: Callable[[], None]) -> None:
        clock, head, size = self.ctx.clock, b"", 0
        async for chunk in resp.content.iter_any():
            now = clock()
            if not chunk:
                continue
            if out.first_token_ns is None:
                out.first_token_ns = now
                on_first()
            if len(head) < WAV_HEADER_BYTES:
                head += chunk[: WAV_HEADER_BYTES - len(head)]
            size += len(chunk)
        out.end_ns = clock()
        if size <= WAV_HEADER_BYTES or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
            raise ProtocolError(f"speech response is not a WAV file ({size} bytes)")
        channels = int.from_bytes(head[22:24], "little") or 1
        rate = int.from_bytes(head[24:28], "little")
        width = int.from_bytes(head[34:36], "little") // 8 or 2
        if rate <= 0:
            raise ProtocolError("speech WAV header has no sample rate")
        out.output_units = (size - WAV_HEADER_BYTES) / (rate * channels * width)
        out.output_tokens = 0
        out.usage_source = "none"
        out.state = State.OK
