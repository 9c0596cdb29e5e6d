"""Asking a target's own tokenizer, before a run, how it counts the words prompts are made of.

Two dialects cover the engines people run: vLLM's and SGLang's ``POST /tokenize`` (``prompt``
or chat ``messages``; ``return_token_strs`` gives each token's text) and llama.cpp's
(``content``, ``with_pieces``; ``POST /apply-template`` renders the chat template). ``surgelab
serve`` speaks the first. The learned costs become a ``TokenizerCalibration``
(``workload/server_tokenizer.py``); a target that cannot tokenize returns None with the reason.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import numpy as np

from surgelab.client.network import request_options
from surgelab.scenario.calibration import TemplateTokens, TokenizerCalibration
from surgelab.scenario.model import Target
from surgelab.workload.server_tokenizer import (
    CANDIDATES,
    ServerTokenizer,
    agrees_with_builtin,
    calibration_from_costs,
    word_costs,
)

__all__ = ["learn_tokenizer", "Learned"]

_CHUNK_WORDS = 512  # candidate words per request (a few thousand tokens)
_TIMEOUT_S = 3.0  # per request; a target that does not answer this fast is not asked again
_PROBE_WORDS = 32


@dataclass(frozen=True)
class Learned:
    """The outcome: a calibration, or why there is none; ``builtin_agrees`` when the server counts
    exactly as the built-in tokenizer does (then nothing needs to change)."""

    calibration: TokenizerCalibration | None
    note: str
    builtin_agrees: bool = False


class _Unsupported(Exception):
    pass


class _NoRoute(_Unsupported):
    """Nothing at this URL (404, 405): no other dialect will find anything there either."""


class _Dialect:
    """One server family's requests; ``url`` is the tokenize endpoint that answered."""

    name = ""

    def __init__(self, session: aiohttp.ClientSession, url: str, model: str, target: Target | None = None) -> None:
        self.session, self.url, self.model = session, url, model
        self.options: dict[str, Any] = {}  # the target's TLS and proxy, as the load path uses them
        if target is not None:
            self.options = request_options(url, target.tls, target.proxy)

    async def post(self, url: str, body: dict[str, Any]) -> Any:
        async with self.session.post(url, json=body, **self.options) as resp:
            if resp.status in (404, 405):
                raise _NoRoute(f"{url} answered HTTP {resp.status}")
            if resp.status != 200:
                raise _Unsupported(f"{url} answered HTTP {resp.status}")
            try:
                return await resp.json(content_type=None)
            except (ValueError, aiohttp.ContentTypeError):
                raise _Unsupported(f"{url} did not answer with JSON") from None

    async def pieces(self, text: str) -> list[Any]:  # pragma: no cover - interface
        raise NotImplementedError

    async def count(self, text: str, special: bool) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    async def count_chat(self, messages: list[dict[str, str]]) -> int:  # pragma: no cover - interface
        raise NotImplementedError


class _Vllm(_Dialect):
    name = "vllm"

    async def pieces(self, text: str) -> list[Any]:
        reply = await self.post(self.url, {"model": self.model, "prompt": text, "add_special_tokens": False,
                                           "return_token_strs": True})  # fmt: skip
        strs = reply.get("token_strs") if isinstance(reply, dict) else None
        if not isinstance(strs, list) or not strs:
            raise _Unsupported(f"{self.url} gave no token_strs")
        return strs

    async def count(self, text: str, special: bool) -> int:
        reply = await self.post(self.url, {"model": self.model, "prompt": text, "add_special_tokens": special})
        return len(reply["tokens"])

    async def count_chat(self, messages: list[dict[str, str]]) -> int:
        reply = await self.post(self.url, {"model": self.model, "messages": messages, "add_generation_prompt": True})
        return len(reply["tokens"])


class _LlamaCpp(_Dialect):
    name = "llama.cpp"

    async def pieces(self, text: str) -> list[Any]:
        reply = await self.post(self.url, {"content": text, "add_special": False, "with_pieces": True})
        tokens = reply.get("tokens") if isinstance(reply, dict) else None
        if not isinstance(tokens, list) or not tokens or not isinstance(tokens[0], dict):
            raise _Unsupported(f"{self.url} gave no pieces")
        return [t["piece"] for t in tokens]

    async def count(self, text: str, special: bool) -> int:
        reply = await self.post(self.url, {"content": text, "add_special": special})
        return len(reply["tokens"])

    async def count_chat(self, messages: list[dict[str, str]]) -> int:
        rendered = await self.post(self.url.rsplit("/", 1)[0] + "/apply-template", {"messages": messages})
        return await self.count(rendered["prompt"], special=True)  # llama-server tokenizes prompts with BOS


def _tokenize_urls(target: Target) -> list[str]:
    base = target.base_url.rstrip("/")
    parts = urlsplit(base)
    root = f"{parts.scheme}://{parts.netloc}"
    return list(dict.fromkeys([root + "/tokenize", base + "/tokenize"]))


async def _dialect(session: aiohttp.ClientSession, target: Target) -> tuple[_Dialect, list[Any]]:
    """The first dialect and endpoint whose answer to the first chunk of candidates has pieces.

    A URL with nothing behind it is not asked again in another dialect, and a target that cannot
    be reached is not asked again at all (the error ends the search): a few requests at most."""
    first = "".join(" " + w for w in CANDIDATES[:_CHUNK_WORDS])
    reasons = []
    for url in _tokenize_urls(target):
        for kind in (_Vllm, _LlamaCpp):
            dialect = kind(session, url, target.model, target)
            try:
                return dialect, await dialect.pieces(first)
            except _NoRoute as exc:
                reasons.append(str(exc))
                break
            except (_Unsupported, KeyError, TypeError) as exc:
                reasons.append(str(exc))
    raise _Unsupported("; ".join(dict.fromkeys(reasons)) or "no /tokenize")


async def _template(dialect: _Dialect, tokenizer: ServerTokenizer) -> TemplateTokens:
    """The template's tokens: counts of small chats less the words in them."""
    rng = np.random.default_rng(7)
    user, system, earlier, answer = (tokenizer.synthesize(k, rng) for k in (_PROBE_WORDS, 16, 16, 16))
    plain = await dialect.count_chat([{"role": "user", "content": user}]) - _PROBE_WORDS
    with_system = await dialect.count_chat([{"role": "system", "content": system}, {"role": "user", "content": user}])
    with_turn = await dialect.count_chat([{"role": "user", "content": earlier}, {"role": "assistant", "content": answer},
                                          {"role": "user", "content": user}])  # fmt: skip
    completion = await dialect.count(user, special=True) - _PROBE_WORDS
    return TemplateTokens(
        completion=max(completion, 0),
        chat=max(plain, 0),
        system=max(with_system - 16 - _PROBE_WORDS - plain, 0),
        turn=max(with_turn - 32 - _PROBE_WORDS - plain, 0),
    )


async def learn_tokenizer(target: Target, headers: dict[str, str]) -> Learned:
    """Learn how ``target`` counts prompt words and what its chat template adds; never raises for the target's answers."""
    timeout = aiohttp.ClientTimeout(total=_TIMEOUT_S)
    try:
        async with aiohttp.ClientSession(headers={**target.headers, **headers}, timeout=timeout) as session:
            dialect, first = await _dialect(session, target)
            chunks = [CANDIDATES[i : i + _CHUNK_WORDS] for i in range(0, len(CANDIDATES), _CHUNK_WORDS)]
            costs: list[int | None] = []
            for k, chunk in enumerate(chunks):
                pieces = first if k == 0 else await dialect.pieces("".join(" " + w for w in chunk))
                chunk_costs = word_costs(chunk, pieces)
                if chunk_costs is None:
                    return Learned(None, f"{dialect.name} {dialect.url}: its tokens do not spell the words sent")
                costs += chunk_costs
            source = f"{dialect.name} {dialect.url}"
            provisional = calibration_from_costs(CANDIDATES, costs, TemplateTokens(), source, False, target.endpoint)
            if provisional is None:
                return Learned(None, f"{source}: fewer than 16 of the candidate words are one token")
            measured, why = True, ""
            try:
                template = await _template(dialect, ServerTokenizer(provisional))
            except (_Unsupported, KeyError, TypeError) as exc:
                template, measured, why = TemplateTokens(), False, f" (chat template not measured: {exc})"
            calibration = provisional.model_copy(update={"template": template, "template_measured": measured})
            agrees = measured and agrees_with_builtin(calibration, costs)
            return Learned(calibration, source + why, builtin_agrees=agrees)
    except _Unsupported as exc:
        return Learned(None, f"no usable /tokenize ({exc})")
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:  # noqa: UP041 - 3.10's timeout error
        return Learned(None, f"no usable /tokenize ({type(exc).__name__}: {exc})")
