"""Answers that call a tool, in each API's words, for requests that offer tools.

``surgelab serve`` calls the first tool offered, once, when the request offers tools and its last
message is not a tool's result (``--tool-calls`` sets the fraction of such requests, default all):
an agent's turn then calls a tool, and the turn that brings its result gets a text answer. The
generated tokens are the call's ``query`` argument, streamed one token per event — OpenAI's
``delta.tool_calls`` fragments, the Responses API's ``response.function_call_arguments.delta``,
Anthropic's ``input_json_delta`` — with the usual usage at the end; the call's opening (its name)
goes out with the first token, since a model's tool parser sees the name only once generated. Same interface as
``Completion`` (``opening``, ``tokens``, ``last_token``, ``closing``, ``whole``).
"""

from __future__ import annotations

from typing import Any

import orjson

from surgelab.server.responses import Completion
from surgelab.server.typed_events import MessagesAnswer, ResponsesAnswer, _event, _usage

__all__ = ["tool_answer", "arguments_of"]

_HEAD, _TAIL = '{"query":"', '"}'


def arguments_of(text: str) -> str:
    """The whole arguments of a call whose generated words are ``text``."""
    return _HEAD + text.lstrip() + _TAIL


def _pieces(words: list[str], first: bool, last: bool) -> list[str]:
    pieces = list(words)
    if first and pieces:
        pieces[0] = _HEAD + pieces[0].lstrip()
    if last and pieces:
        pieces[-1] += _TAIL
    return pieces


class _StartsWithTheCall:
    """The call's opening (its name) goes out with its first generated token, as a model's parser sends it."""

    _started = False

    def _start(self) -> bytes:  # pragma: no cover - each answer has its own
        raise NotImplementedError

    @staticmethod
    def said(text: str) -> str:
        """What the answer said, for a conversation kept on the server: the call's arguments."""
        return arguments_of(text)

    def _start_if(self, pieces: list[str]) -> bytes:
        if self._started or not pieces:
            return b""
        self._started = True
        return self._start()


class ChatToolCall(_StartsWithTheCall, Completion):
    def __init__(self, request_id: str, model: str, name: str) -> None:
        super().__init__(request_id, model, chat=True)
        self.name, self.call_id = name, "call_" + request_id

    def _delta(self, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        return self._event([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}])

    def opening(self) -> bytes:
        return b""

    def _start(self) -> bytes:
        call = {"index": 0, "id": self.call_id, "type": "function", "function": {"name": self.name, "arguments": ""}}
        return self._delta({"role": "assistant", "content": None, "tool_calls": [call]})

    def _arguments(self, pieces: list[str], finish_reason: str | None = None) -> bytes:
        return self._start_if(pieces) + b"".join(
            self._delta(
                {"tool_calls": [{"index": 0, "function": {"arguments": p}}]},
                finish_reason if k == len(pieces) - 1 else None,
            )
            for k, p in enumerate(pieces)
        )

    def tokens(self, words: list[str], first: bool) -> bytes:
        return self._arguments(_pieces(words, first, False))

    def last_token(self, word: str, first: bool, finish_reason: str) -> bytes:
        return self._arguments(_pieces([word], first, True), "tool_calls")

    def whole(self, text: str, finish_reason: str, usage: dict[str, int]) -> bytes:
        call = {
            "id": self.call_id,
            "type": "function",
            "function": {"name": self.name, "arguments": arguments_of(text)},
        }
        choice = {"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                  "logprobs": None, "finish_reason": "tool_calls"}  # fmt: skip
        body = {"id": self.id, "object": "chat.completion", "created": self.created, "model": self.model,
                "choices": [choice], "usage": usage}  # fmt: skip
        return orjson.dumps(body)


class ResponsesToolCall(_StartsWithTheCall, ResponsesAnswer):
    def __init__(self, request_id: str, model: str, max_output_tokens: int | None, name: str) -> None:
        super().__init__(request_id, model, max_output_tokens)
        self.name, self._item_id, self.call_id = name, "fc_" + request_id, "call_" + request_id

    def _item(self, arguments: str, status: str) -> dict[str, Any]:
        return {"id": self._item_id, "type": "function_call", "status": status, "call_id": self.call_id,
                "name": self.name, "arguments": arguments}  # fmt: skip

    def opening(self) -> bytes:
        created = self._response("in_progress", [], None)
        return self._next("response.created", {"response": created}) + self._next(
            "response.in_progress", {"response": created}
        )

    def _start(self) -> bytes:
        return self._next("response.output_item.added", {"output_index": 0, "item": self._item("", "in_progress")})

    def _arguments(self, pieces: list[str]) -> bytes:
        return self._start_if(pieces) + b"".join(
            self._next(
                "response.function_call_arguments.delta", {"item_id": self._item_id, "output_index": 0, "delta": p}
            )
            for p in pieces
        )

    def tokens(self, words: list[str], first: bool) -> bytes:
        return self._arguments(_pieces(words, first, False))

    def last_token(self, word: str, first: bool, finish_reason: str) -> bytes:
        return self._arguments(_pieces([word], first, True))

    def closing(self, text: str, finish_reason: str, usage: dict[str, int], include_usage: bool) -> bytes:
        item = self._item(arguments_of(text), "completed")
        where = {"item_id": self._item_id, "output_index": 0}
        return (
            self._next("response.function_call_arguments.done", {**where, "arguments": item["arguments"]})
            + self._next("response.output_item.done", {"output_index": 0, "item": item})
            + self._next("response.completed", {"response": self._response("completed", [item], _usage(usage))})
        )

    def whole(self, text: str, finish_reason: str, usage: dict[str, int]) -> bytes:
        return orjson.dumps(self._response("completed", [self._item(arguments_of(text), "completed")], _usage(usage)))


class MessagesToolCall(_StartsWithTheCall, MessagesAnswer):
    def __init__(self, request_id: str, model: str, prompt_tokens: int, name: str) -> None:
        super().__init__(request_id, model, prompt_tokens)
        self.name, self.call_id = name, "toolu_" + request_id

    def opening(self) -> bytes:
        return _event("message_start", {"type": "message_start", "message": self._message([], None, 1)})

    def _start(self) -> bytes:
        block = {"type": "tool_use", "id": self.call_id, "name": self.name, "input": {}}
        return _event("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block})

    def _arguments(self, pieces: list[str]) -> bytes:
        return self._start_if(pieces) + b"".join(
            _event(
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": p}},
            )  # fmt: skip
            for p in pieces
        )

    def tokens(self, words: list[str], first: bool) -> bytes:
        return self._arguments(_pieces(words, first, False))

    def last_token(self, word: str, first: bool, finish_reason: str) -> bytes:
        return self._arguments(_pieces([word], first, True))

    def closing(self, text: str, finish_reason: str, usage: dict[str, int], include_usage: bool) -> bytes:
        return (
            _event("content_block_stop", {"type": "content_block_stop", "index": 0})
            + _event(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                    "usage": {"output_tokens": usage["completion_tokens"]},
                },
            )  # fmt: skip
            + _event("message_stop", {"type": "message_stop"})
        )

    def whole(self, text: str, finish_reason: str, usage: dict[str, int]) -> bytes:
        block = {"type": "tool_use", "id": self.call_id, "name": self.name, "input": orjson.loads(arguments_of(text))}
        return orjson.dumps(self._message([block], "tool_use", usage["completion_tokens"]))


def tool_answer(api: str, request_id: str, model: str, gen: Any) -> Any:
    """The answer of ``api`` (chat, responses, messages) that calls ``gen``'s first tool."""
    name = gen.tools[0]
    if api == "responses":
        return ResponsesToolCall(request_id, model, gen.max_tokens, name)
    if api == "messages":
        return MessagesToolCall(request_id, model, gen.prompt_tokens, name)
    return ChatToolCall(request_id, model, name)
