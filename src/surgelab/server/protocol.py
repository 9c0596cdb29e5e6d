"""The request shapes the server accepts, parsed into typed requests or an ApiError.

OpenAI's chat, completions and Responses API, and Anthropic's Messages API: each reduced to
one ``Generation``. Prompt tokens are counted with ``BuiltinTokenizer`` so a client using the
same tokenizer agrees exactly: the sum over messages (and instructions or system prompt) of
the text content, or the completion prompt.
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import orjson

from surgelab.tokenizer import VOCABULARY, BuiltinTokenizer
from surgelab.workload.media import image_size, image_tokens

__all__ = [
    "parse_tokenize",
    "ApiError",
    "Generation",
    "EmbeddingInput",
    "parse_body",
    "parse_chat",
    "parse_completion",
    "parse_embeddings",
    "parse_messages",
    "parse_responses",
    "plan_output",
]

_TOKENIZER = BuiltinTokenizer()
_VOCABULARY_INDEX = {word: i for i, word in enumerate(VOCABULARY)}
_ANTHROPIC_ERRORS = {401: "authentication_error", 403: "permission_error", 404: "not_found_error",
                     413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error", 529: "overloaded_error"}  # fmt: skip
_TEXT_PARTS = frozenset(("text", "input_text", "output_text"))
_TOOL_ITEMS = {"function_call": "arguments", "function_call_output": "output"}  # Responses API item: its counted text


class ApiError(Exception):
    """An error answered as OpenAI does: ``{"error": {"message", "type", "param", "code"}}``."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | int | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.type = status, message, type
        self.param, self.code, self.headers = param, code, dict(headers or {})

    def body(self) -> bytes:
        error = {"message": self.message, "type": self.type, "param": self.param, "code": self.code}
        return orjson.dumps({"error": error})

    def anthropic_body(self) -> bytes:
        """The same error as Anthropic's Messages API answers it: ``{"type": "error", "error": {"type", "message"}}``."""
        kind = _ANTHROPIC_ERRORS.get(self.status, "api_error" if self.status >= 500 else "invalid_request_error")
        return orjson.dumps({"type": "error", "error": {"type": kind, "message": self.message}})


@dataclass(frozen=True, slots=True)
class Generation:
    """A chat or completion request, reduced to what the engine and the stream need."""

    chat: bool
    prompt_tokens: int
    prompt_parts: tuple[str, ...]
    """The counted texts, in order (message contents or the prompt), for prefix hashing."""
    max_tokens: int | None
    min_tokens: int
    ignore_eos: bool
    stream: bool
    include_usage: bool
    seed: int | None
    previous_response_id: str | None = None
    """Responses API: the stored conversation this request continues."""
    tools: tuple[str, ...] = ()
    """Names of the functions the request offers (server/tool_answers.py)."""
    after_tool: bool = False
    """Its last message is a tool's result: the answer is text, not another call."""


@dataclass(frozen=True, slots=True)
class EmbeddingInput:
    texts: tuple[str, ...]
    token_counts: tuple[int, ...]
    base64: bool


def parse_body(raw: bytes) -> Mapping[str, Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, f"request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "request body must be a JSON object")
    return body


def parse_chat(body: Mapping[str, Any]) -> Generation:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "'messages' must be a non-empty array", param="messages")
    texts = [text for i, m in enumerate(messages) for text in _message_texts(m, i)]
    images = sum(_image_tokens(m, i) for i, m in enumerate(messages))
    last = messages[-1]
    return replace(_generation(body, chat=True, texts=texts, token_ids=images), tools=_tool_names(body, "chat"),
                   after_tool=isinstance(last, dict) and last.get("role") == "tool")  # fmt: skip


def parse_responses(body: Mapping[str, Any]) -> Generation:
    """OpenAI's Responses API: ``input`` (a string or message items), ``instructions``, ``max_output_tokens``."""
    raw = body.get("input")
    items = [{"role": "user", "content": raw}] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not items:
        raise ApiError(400, "'input' must be a string or a non-empty array of items", param="input")
    texts = [text for i, item in enumerate(items) for text in _message_texts(item, i, "input")]
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise ApiError(400, "'instructions' must be a string", param="instructions")
    previous = body.get("previous_response_id")
    if previous is not None and not isinstance(previous, str):
        raise ApiError(400, "'previous_response_id' must be a string", param="previous_response_id")
    limits = {"max_tokens": body.get("max_output_tokens")}
    gen = _generation({**body, **limits}, chat=True, texts=[instructions or "", *texts], param="input")
    last = items[-1]
    return replace(gen, previous_response_id=previous, tools=_tool_names(body, "responses"),
                   after_tool=isinstance(last, dict) and last.get("type") == "function_call_output")  # fmt: skip


def parse_messages(body: Mapping[str, Any]) -> Generation:
    """Anthropic's Messages API: ``messages`` (string or block content), ``system``, a required ``max_tokens``."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages: must be a non-empty array", param="messages")
    if not _is_int(body.get("max_tokens")):
        raise ApiError(400, "max_tokens: Field required (an integer)", param="max_tokens")
    system = body.get("system")
    system_texts = _message_texts({"role": "system", "content": system}, 0, "system") if system else []
    texts = [text for i, m in enumerate(messages) for text in _message_texts(m, i)]
    content = messages[-1].get("content") if isinstance(messages[-1], dict) else None
    after = isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    gen = _generation(body, chat=True, texts=[*system_texts, *texts])
    return replace(gen, tools=_tool_names(body, "messages"), after_tool=after)


def _tool_names(body: Mapping[str, Any], api: str) -> tuple[str, ...]:
    """The function names a request offers: chat's ``tools[].function.name``, the others' ``tools[].name``."""
    tools = body.get("tools")
    if tools is None:
        return ()
    if not isinstance(tools, list):
        raise ApiError(400, "'tools' must be an array", param="tools")
    names = []
    for k, tool in enumerate(tools):
        holder = tool.get("function") if api == "chat" and isinstance(tool, dict) else tool
        name = holder.get("name") if isinstance(holder, dict) else None
        if not isinstance(name, str) or not name:
            raise ApiError(400, f"tools[{k}] needs a function name", param=f"tools[{k}]")
        names.append(name)
    return tuple(names)


def parse_tokenize(body: Mapping[str, Any], max_model_len: int) -> dict[str, Any]:
    """vLLM's ``POST /tokenize`` answer for ``prompt`` or chat ``messages``, counted as the server counts
    prompts (the built-in tokenizer, no chat template): clients calibrate their prompt lengths with it."""
    if isinstance(body.get("messages"), list):
        texts = [text for i, m in enumerate(body["messages"]) for text in _message_texts(m, i)]
    elif isinstance(body.get("prompt"), str):
        texts = [body["prompt"]]
    else:
        raise ApiError(400, "give 'prompt' (a string) or 'messages' (an array)", param="prompt")
    pieces = [piece for text in texts for piece in _TOKENIZER.pieces(text)]
    answer: dict[str, Any] = {
        "count": len(pieces),
        "max_model_len": max_model_len,
        "tokens": [_token_id(p) for p in pieces],
    }
    if body.get("return_token_strs"):
        answer["token_strs"] = pieces
    return answer


def _token_id(piece: str) -> int:
    """A stable id for a piece: its vocabulary index for the synthetic words, a hash above them otherwise."""
    word = piece.strip()
    index = _VOCABULARY_INDEX.get(word)
    return index if index is not None else len(VOCABULARY) + zlib.crc32(piece.encode()) % 100_000


def _image_tokens(message: Mapping[str, Any], index: int) -> int:
    """Prompt tokens of a message's image parts, by OpenAI's tile rule (surgelab.workload.media)."""
    content = message.get("content")
    if not isinstance(content, list):
        return 0
    total = 0
    for part in content:
        if part.get("type") != "image_url":
            continue
        param = f"messages[{index}].content"
        image = part.get("image_url")
        url, detail = (image.get("url"), image.get("detail", "auto")) if isinstance(image, dict) else (image, "auto")
        if not isinstance(url, str):
            raise ApiError(400, "image_url needs a url", param=param)
        data = url.partition(",")[2] if url.startswith("data:") else ""
        if not data:  # a remote URL is never fetched (loopback only) and an empty one shows nothing: no cost
            continue
        try:
            width, height = image_size(base64.b64decode(data))
        except Exception:  # noqa: BLE001 - Pillow raises many kinds for bytes that are not an image
            raise ApiError(400, "image_url is not a readable PNG or JPEG image", param=param) from None
        total += image_tokens(width, height, "openai", detail if detail in ("low", "high") else "auto")
    return total


def parse_completion(body: Mapping[str, Any]) -> Generation:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return _generation(body, chat=False, texts=[prompt])
    if isinstance(prompt, list) and prompt and all(_is_int(t) for t in prompt):
        return _generation(body, chat=False, texts=[], token_ids=len(prompt))
    raise ApiError(400, "'prompt' must be a string or an array of token ids (one prompt only)", param="prompt")


def parse_embeddings(body: Mapping[str, Any]) -> EmbeddingInput:
    raw = body.get("input")
    items = raw if isinstance(raw, list) and raw and not all(_is_int(t) for t in raw) else [raw]
    texts, counts = [], []
    for item in items:
        if isinstance(item, str) and item:
            texts.append(item)
            counts.append(_TOKENIZER.count(item))
        elif isinstance(item, list) and item and all(_is_int(t) for t in item):
            texts.append(" ".join(map(str, item)))
            counts.append(len(item))
        else:
            raise ApiError(
                400, "'input' must be a non-empty string, array of strings, or token array(s)", param="input"
            )
    fmt = body.get("encoding_format", "float")
    if fmt not in ("float", "base64"):
        raise ApiError(400, "'encoding_format' must be 'float' or 'base64'", param="encoding_format")
    return EmbeddingInput(tuple(texts), tuple(counts), fmt == "base64")


def _message_texts(message: Any, index: int, field: str = "messages") -> list[str]:
    """The texts of one message: its string content, or its text parts (OpenAI ``text`` and
    ``input_text``/``output_text`` of the Responses API; Anthropic's ``text`` blocks)."""
    param = f"{field}[{index}]"
    if isinstance(message, dict) and message.get("type") in _TOOL_ITEMS:  # Responses API tool items
        text = message.get(_TOOL_ITEMS[message["type"]])
        if not isinstance(text, str):
            raise ApiError(400, f"{param}.{_TOOL_ITEMS[message['type']]} must be a string", param=param)
        return [text]
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise ApiError(400, f"{param} must be an object with a 'role'", param=param)
    content = message.get("content")
    calls = [c.get("function", {}).get("arguments") or "" for c in message.get("tool_calls") or () if isinstance(c, dict)]
    if content is None or isinstance(content, str):
        return [content or "", *calls]
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or "type" not in part:
                raise ApiError(400, f"{param}.content parts must be objects with a 'type'", param=param)
            if part["type"] == "tool_use":  # Anthropic's: the call's input, as the client sent it
                parts.append(orjson.dumps(part.get("input") or {}).decode())
            elif part["type"] == "tool_result":
                parts.append(part["content"] if isinstance(part.get("content"), str) else "")
            elif part["type"] in _TEXT_PARTS:
                if not isinstance(part.get("text"), str):
                    raise ApiError(400, f"{param}.content text part needs 'text'", param=param)
                parts.append(part["text"])
        return parts
    raise ApiError(400, f"{param}.content must be a string or an array of parts", param=param)


def _generation(
    body: Mapping[str, Any], *, chat: bool, texts: list[str], token_ids: int = 0, param: str | None = None
) -> Generation:
    names = ("max_completion_tokens", "max_tokens") if chat else ("max_tokens",)
    max_tokens = next((body[n] for n in names if body.get(n) is not None), None)
    if max_tokens is not None and not (_is_int(max_tokens) and max_tokens >= 1):
        raise ApiError(400, "'max_tokens' must be an integer >= 1", param="max_tokens")
    min_tokens = body.get("min_tokens") or 0
    if not _is_int(min_tokens) or min_tokens < 0:
        raise ApiError(400, "'min_tokens' must be an integer >= 0", param="min_tokens")
    if max_tokens is not None and min_tokens > max_tokens:
        raise ApiError(400, "'min_tokens' must not exceed 'max_tokens'", param="min_tokens")
    n = body.get("n", 1)
    if n != 1:
        raise ApiError(400, "only n=1 is supported", param="n")
    seed = body.get("seed")
    if seed is not None and not _is_int(seed):
        raise ApiError(400, "'seed' must be an integer", param="seed")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise ApiError(400, "'stream_options' must be an object", param="stream_options")
    prompt_tokens = token_ids + sum(_TOKENIZER.count(t) for t in texts)
    if prompt_tokens < 1:
        raise ApiError(400, "the prompt is empty", param=param or ("messages" if chat else "prompt"))
    return Generation(
        chat=chat,
        prompt_tokens=prompt_tokens,
        prompt_parts=tuple(texts),
        max_tokens=max_tokens,
        min_tokens=min_tokens,
        ignore_eos=bool(body.get("ignore_eos", False)),
        stream=bool(body.get("stream", False)),
        include_usage=bool(options.get("include_usage", False)),
        seed=seed,
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def plan_output(gen: Generation, context_left: int, typical: int, rng: np.random.Generator) -> tuple[int, str]:
    """How many tokens to generate, and the finish reason a real model would report.

    ``ignore_eos`` generates exactly the cap (``max_tokens``, else the context left; asking
    for more than the context leaves is an error, as in vLLM). Otherwise
    the 'natural' length is log-normal around ``typical`` (σ = 0.8), raised to ``min_tokens``
    and cut at the cap; a cut reports ``length``, a natural end ``stop``.
    """
    cap = context_left if gen.max_tokens is None else gen.max_tokens
    if cap > context_left or cap < 1 or gen.min_tokens > cap:
        raise ApiError(
            400,
            f"a {gen.prompt_tokens}-token prompt leaves {max(context_left, 0)} tokens of this "
            f"model's context for the output; {cap} were requested",
            param="max_tokens",
            code="context_length_exceeded",
        )
    if gen.ignore_eos:
        return cap, "length"
    natural = max(1, gen.min_tokens, round(typical * float(rng.lognormal(0.0, 0.8))))
    return (cap, "length") if natural >= cap else (natural, "stop")
