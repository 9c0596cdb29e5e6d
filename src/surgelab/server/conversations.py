"""Server-side conversation state of the Responses API: ``previous_response_id`` names a stored one.

Each answer is kept (its prompt texts and its output) under its response id; a request that
names one continues it: its prompt is the stored texts, then its own, counted and prefix-hashed
as one. The store holds the most recent ``limit`` answers (the oldest go first), so a long run
cannot grow it without bound; an id that is unknown or gone is OpenAI's 400.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from surgelab.server.protocol import ApiError, Generation, parse_responses
from surgelab.tokenizer import BuiltinTokenizer

__all__ = ["Conversations"]

_TOKENIZER = BuiltinTokenizer()


class Conversations:
    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self._kept: OrderedDict[str, tuple[tuple[str, ...], int]] = OrderedDict()  # id -> (texts, tokens)

    def resume(self, body: Mapping[str, Any]) -> Generation:
        """The request in ``body``, with the conversation it continues in front of its own prompt."""
        gen = parse_responses(body)
        previous = gen.previous_response_id
        if previous is None:
            return gen
        kept = self._kept.get(previous)
        if kept is None:
            raise ApiError(400, f"Previous response with id '{previous}' not found.", param="previous_response_id",
                           code="previous_response_not_found")  # fmt: skip
        texts, tokens = kept
        return replace(gen, prompt_parts=texts + gen.prompt_parts, prompt_tokens=tokens + gen.prompt_tokens)

    def keep(self, response_id: str, gen: Generation, text: str) -> None:
        """Store an answer so a later request can name it."""
        self._kept[response_id] = (*gen.prompt_parts, text), gen.prompt_tokens + _TOKENIZER.count(text)
        while len(self._kept) > self.limit:
            self._kept.popitem(last=False)
