"""The official ``openai`` SDK against ``surgelab serve`` running as a subprocess."""

from __future__ import annotations

import math

import openai
import pytest

from surgelab.server.process import ServerProcess
from surgelab.tokenizer import BuiltinTokenizer

TOKENIZER = BuiltinTokenizer()
MESSAGES = [
    {"role": "system", "content": "You are a terse assistant."},
    {"role": "user", "content": "Name three primes, please: 2, 3 and?"},
]


@pytest.fixture
def sdk(tiny_server: ServerProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=tiny_server.base_url, api_key="unused", max_retries=0, timeout=10.0)


def prompt_count(messages) -> int:
    return sum(TOKENIZER.count(m["content"]) for m in messages)


def test_chat_completion(sdk):
    reply = sdk.chat.completions.create(model="surgelab-tiny", messages=MESSAGES, max_tokens=12, extra_body={"ignore_eos": True})
    assert reply.object == "chat.completion" and reply.model == "surgelab-tiny"
    choice = reply.choices[0]
    assert choice.message.role == "assistant" and choice.finish_reason == "length"
    assert reply.usage.completion_tokens == 12 == TOKENIZER.count(choice.message.content)
    assert reply.usage.prompt_tokens == prompt_count(MESSAGES)
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + 12


def test_streaming_chat_with_usage_chunk(sdk):
    chunks = list(
        sdk.chat.completions.create(
            model="surgelab-tiny",
            messages=MESSAGES,
            max_completion_tokens=9,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
        )
    )
    *tokens, last = chunks
    assert last.choices == [] and last.usage.completion_tokens == 9
    assert last.usage.prompt_tokens == prompt_count(MESSAGES)
    assert len(tokens) == 9 and tokens[0].choices[0].delta.role == "assistant"
    assert tokens[-1].choices[0].finish_reason == "length"
    text = "".join(c.choices[0].delta.content for c in tokens)
    assert TOKENIZER.count(text) == 9


def test_text_completion_streamed_and_whole(sdk):
    whole = sdk.completions.create(
        model="surgelab-tiny", prompt="Once upon a time", max_tokens=5, extra_body={"ignore_eos": True}
    )
    assert whole.object == "text_completion" and whole.usage.completion_tokens == 5
    assert whole.usage.prompt_tokens == TOKENIZER.count("Once upon a time")
    chunks = list(
        sdk.completions.create(
            model="surgelab-tiny",
            prompt="Once upon a time",
            max_tokens=5,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
        )
    )
    assert chunks[-1].usage.completion_tokens == 5 and chunks[-1].choices == []
    assert TOKENIZER.count("".join(c.choices[0].text for c in chunks[:-1])) == 5


def test_without_include_usage_no_usage_chunk(sdk):
    chunks = list(sdk.chat.completions.create(model="surgelab-tiny", messages=MESSAGES, max_tokens=3, stream=True))
    assert all(c.choices for c in chunks) and all(c.usage is None for c in chunks)


def test_embeddings_float_and_base64(sdk):
    default = sdk.embeddings.create(model="surgelab-tiny", input=["first text", "second one"])  # base64
    plain = sdk.embeddings.create(model="surgelab-tiny", input=["first text", "second one"], encoding_format="float")
    assert [d.index for d in default.data] == [0, 1]
    assert default.usage.prompt_tokens == TOKENIZER.count("first text") + TOKENIZER.count("second one")
    for a, b in zip(default.data, plain.data, strict=True):
        assert len(a.embedding) == 384
        assert a.embedding == pytest.approx(b.embedding, abs=1e-6)
        assert math.isclose(sum(x * x for x in b.embedding), 1.0, rel_tol=1e-4)
    assert default.data[0].embedding != default.data[1].embedding


def test_models_lists_the_served_model(sdk):
    assert [m.id for m in sdk.models.list()] == ["surgelab-tiny"]
