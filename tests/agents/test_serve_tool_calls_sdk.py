"""``surgelab serve``'s tool calls read back through the official ``openai`` SDK: chat and the Responses API."""

from __future__ import annotations

import json

import openai
import pytest

from surgelab.server.process import serve_process

TOOLS = [{"type": "function", "function": {"name": "search", "description": "d", "parameters": {"type": "object"}}}]
ASK = [{"role": "user", "content": "look it up"}]


@pytest.fixture
def sdk(embedded: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=embedded, api_key="unused", max_retries=0, timeout=10.0)


def test_chat_calls_the_tool_then_answers_its_result(sdk):
    reply = sdk.chat.completions.create(model="surgelab-tiny", messages=ASK, tools=TOOLS, max_tokens=4,
                                        extra_body={"ignore_eos": True})  # fmt: skip
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.function.name == "search" and len(json.loads(call.function.arguments)["query"].split()) == 4
    assert reply.usage.completion_tokens == 4
    result = [{"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
              {"role": "tool", "tool_call_id": call.id, "content": "found two pages"}]  # fmt: skip
    after = sdk.chat.completions.create(model="surgelab-tiny", messages=ASK + result, tools=TOOLS, max_tokens=4)
    assert after.choices[0].message.tool_calls is None and after.choices[0].message.content
    assert after.usage.prompt_tokens > reply.usage.prompt_tokens, "the call and its result are counted"


def test_streamed_chat_tool_call_fragments_add_up(sdk):
    chunks = list(sdk.chat.completions.create(model="surgelab-tiny", messages=ASK, tools=TOOLS, max_tokens=5, stream=True,
                                              extra_body={"ignore_eos": True}))  # fmt: skip
    fragments = [c.choices[0].delta.tool_calls[0] for c in chunks if c.choices and c.choices[0].delta.tool_calls]
    assert fragments[0].id and fragments[0].function.name == "search"
    arguments = "".join(f.function.arguments or "" for f in fragments)
    assert len(json.loads(arguments)["query"].split()) == 5 and len(fragments) == 6, "the name, then one token each"
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_responses_stream_a_function_call(sdk):
    tools = [{"type": "function", "name": "search", "description": "d", "parameters": {"type": "object"}}]
    events = list(sdk.responses.create(model="surgelab-tiny", input="look it up", tools=tools, max_output_tokens=3,
                                       stream=True, extra_body={"ignore_eos": True}))  # fmt: skip
    kinds = [e.type for e in events]
    assert kinds.count("response.function_call_arguments.delta") == 3
    assert kinds.index("response.output_item.added") < kinds.index("response.function_call_arguments.delta")
    done = events[-1].response
    assert done.status == "completed" and done.output[0].type == "function_call" and done.output[0].name == "search"
    assert done.usage.output_tokens == 3


@pytest.mark.parametrize(("share", "low", "high"), [("0", 0, 0), ("0.5", 6, 14)])
def test_tool_calls_share_of_requests(share, low, high):
    """``surgelab serve --tool-calls`` answers that share of the requests offering tools with a call (seeded)."""
    with serve_process(["--tool-calls", share, "--seed", "3"]) as url:
        sdk = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=10.0)
        replies = [
            sdk.chat.completions.create(model="surgelab-tiny", messages=ASK, tools=TOOLS, max_tokens=2)
            for _ in range(20)
        ]
    calls = sum(r.choices[0].finish_reason == "tool_calls" for r in replies)
    assert low <= calls <= high
