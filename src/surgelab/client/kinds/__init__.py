"""One module per request kind: each builds the HTTP call from a spec and reads the response.

``KINDS`` maps a kind's name to its class; a flow is not a kind of its own here but a chain
of them (``client/openai.py``).
"""

from __future__ import annotations

from surgelab.client.kinds.audio import Speech, Transcription
from surgelab.client.kinds.base import Kind, KindContext
from surgelab.client.kinds.embeddings import Embeddings
from surgelab.client.kinds.http import Http
from surgelab.client.kinds.images import ImageGeneration
from surgelab.client.kinds.messages import Messages
from surgelab.client.kinds.rerank import Rerank
from surgelab.client.kinds.responses import Responses
from surgelab.client.kinds.text import Chat, Completions, Vision

__all__ = ["KINDS", "STREAMING_KINDS", "Kind", "KindContext", "build_kinds"]

KINDS: dict[str, type] = {
    "chat": Chat,
    "completions": Completions,
    "embeddings": Embeddings,
    "vision": Vision,
    "transcription": Transcription,
    "image_generation": ImageGeneration,
    "rerank": Rerank,
    "speech": Speech,
    "http": Http,
    "responses": Responses,
    "messages": Messages,
}
STREAMING_KINDS = ("chat", "completions", "vision", "responses", "messages")
"""Kinds whose tokens stream when ``target.stream`` is on (TTFT and ITL apply)."""


def build_kinds(ctx: KindContext) -> dict[str, Kind]:
    return {name: cls(ctx) for name, cls in KINDS.items()}
