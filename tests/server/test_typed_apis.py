"""`surgelab serve` answers OpenAI's Responses API and Anthropic's Messages API as their clients expect.

The Responses API is read back through the OpenAI SDK (its own event and response types); the
Messages API's events are checked on the wire: their names, their order and their usage.
"""

from __future__ import annotations

import openai
import orjson
import pytest

from surgelab.aio import run_async
from surgelab.runner.run import run_scenario
from surgelab.server.process import ServerProcess
from surgelab.tokenizer import BuiltinTokenizer

TOK = BuiltinTokenizer()
MODEL = "surgelab-tiny"
PROMPT = "tell me about the quiet river and the old mill"
SYSTEM = "answer briefly"


@pytest.fixture
def sdk(tiny_server) -> openai.OpenAI:
    return openai.OpenAI(base_url=tiny_server.base_url, api_key="unused", max_retries=0)


def _events(body: bytes) -> list[tuple[str, dict]]:
    """(event name, data) of every SSE event, each named by an ``event:`` line."""
    events = []
    for block in body.decode().strip().split("\n\n"):
        name_line, data_line = block.split("\n")
        assert name_line.startswith("event: ") and data_line.startswith("data: "), block
        events.append((name_line[len("event: ") :], orjson.loads(data_line[len("data: ") :])))
    return events


def test_responses_whole_through_the_sdk(sdk):
    response = sdk.responses.create(model=MODEL, input=PROMPT, instructions=SYSTEM, max_output_tokens=9,
                                    extra_body={"ignore_eos": True})  # fmt: skip
    assert response.id.startswith("resp_") and response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"
    assert len(response.output_text.split()) == 9
    assert response.usage.output_tokens == 9
    assert response.usage.input_tokens == TOK.count(PROMPT) + TOK.count(SYSTEM)


def test_responses_stream_through_the_sdk(sdk):
    stream = sdk.responses.create(model=MODEL, input=[{"role": "user", "content": PROMPT}], max_output_tokens=6,
                                  stream=True, extra_body={"ignore_eos": True})  # fmt: skip
    events = list(stream)
    types = [e.type for e in events]
    assert types[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]  # fmt: skip
    assert types[4:10] == ["response.output_text.delta"] * 6
    assert types[10:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.incomplete"]  # fmt: skip
    assert [e.sequence_number for e in events] == list(range(len(events)))
    last = events[-1].response
    assert last.usage.output_tokens == 6 and last.usage.input_tokens == TOK.count(PROMPT)
    assert last.output_text == "".join(e.delta for e in events[4:10])


def test_previous_response_id_continues_the_stored_conversation(sdk):
    first = sdk.responses.create(model=MODEL, input=PROMPT, max_output_tokens=5, extra_body={"ignore_eos": True})
    second = sdk.responses.create(model=MODEL, input="and then", previous_response_id=first.id, max_output_tokens=3)
    assert second.usage.input_tokens == TOK.count(PROMPT) + 5 + TOK.count("and then"), "the whole conversation"
    with pytest.raises(openai.BadRequestError) as info:
        sdk.responses.create(model=MODEL, input="x", previous_response_id="resp_nothing", max_output_tokens=3)
    assert info.value.body["code"] == "previous_response_not_found"


def test_messages_stream_events_in_anthropics_order(http):
    body = {"model": MODEL, "system": [{"type": "text", "text": SYSTEM}], "max_tokens": 5, "stream": True,
            "ignore_eos": True, "messages": [{"role": "user", "content": [{"type": "text", "text": PROMPT}]}]}  # fmt: skip
    reply = http.post("/v1/messages", body)
    assert reply.status == 200 and reply.headers["Content-Type"].startswith("text/event-stream")
    events = _events(reply.body)
    assert all(name == data["type"] for name, data in events), "each event's name is its data's type"
    names = [name for name, _ in events]
    assert names == ["message_start", "content_block_start", "ping", *["content_block_delta"] * 5,
                     "content_block_stop", "message_delta", "message_stop"]  # fmt: skip
    start = events[0][1]["message"]
    assert start["id"].startswith("msg_") and start["usage"]["input_tokens"] == TOK.count(PROMPT) + TOK.count(SYSTEM)
    assert all(data["delta"]["type"] == "text_delta" for _, data in events[3:8])
    delta = events[9][1]
    assert delta["delta"]["stop_reason"] == "max_tokens" and delta["usage"]["output_tokens"] == 5


def test_messages_whole(http):
    reply = http.post("/v1/messages", {"model": MODEL, "max_tokens": 4, "ignore_eos": True,
                                       "messages": [{"role": "user", "content": PROMPT}]})  # fmt: skip
    body = reply.json()
    assert reply.status == 200 and body["type"] == "message" and body["role"] == "assistant"
    assert body["stop_reason"] == "max_tokens" and len(body["content"][0]["text"].split()) == 4
    assert body["usage"] == {"input_tokens": TOK.count(PROMPT), "output_tokens": 4}


@pytest.mark.parametrize(
    ("body", "status", "kind"),
    [
        ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}, 400, "invalid_request_error"),
        ({"model": MODEL, "max_tokens": 4, "messages": []}, 400, "invalid_request_error"),
        ({"model": "other", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}, 404, "not_found_error"),
    ],
    ids=["no-max-tokens", "no-messages", "unknown-model"],
)
def test_messages_errors_in_anthropics_shape(http, body, status, kind):
    reply = http.post("/v1/messages", body)
    assert reply.status == status
    error = reply.json()
    assert error["type"] == "error" and error["error"]["type"] == kind and error["error"]["message"]


def test_a_served_token_is_taken_as_anthropics_x_api_key(monkeypatch, scenario_for, tmp_path):
    """A messages run sends its key as x-api-key (no Bearer header): a server with a token lets it in."""
    token = "serve-token-0123456789"
    monkeypatch.setenv("SURGELAB_TEST_SERVE_TOKEN", token)
    with ServerProcess(["--token-env", "SURGELAB_TEST_SERVE_TOKEN"], profile="tiny") as server:
        scenario = scenario_for(server.base_url, MODEL, target={"api_key_env": "SURGELAB_TEST_SERVE_TOKEN"},
                                load={"rate": 5, "duration": "0.6s"}, workload={"kind": "messages"}, preflight=False)  # fmt: skip
        summary = run_async(run_scenario(scenario, tmp_path / "run", api_key=token)).summary
    assert summary["requests"]["ok"] == summary["requests"]["scheduled"] > 0, summary["requests"]["by_state"]
