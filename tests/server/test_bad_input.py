"""Malformed requests get 400 and an OpenAI-style error body, never a 500 or a hang."""

from __future__ import annotations

import openai
import pytest

CHAT = "/v1/chat/completions"
USER = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        (CHAT, b"{not json", None),
        (CHAT, b"[1, 2]", None),
        (CHAT, {"model": "m"}, "messages"),
        (CHAT, {"model": "m", "messages": []}, "messages"),
        (CHAT, {"model": "m", "messages": ["hi"]}, "messages[0]"),
        (CHAT, {"model": "m", "messages": [{"role": "user", "content": 5}]}, "messages[0]"),
        (CHAT, {"model": "m", "messages": USER, "max_tokens": 0}, "max_tokens"),
        (CHAT, {"model": "m", "messages": USER, "max_tokens": "ten"}, "max_tokens"),
        (CHAT, {"model": "m", "messages": USER, "max_tokens": 3, "min_tokens": 9}, "min_tokens"),
        (CHAT, {"model": "m", "messages": USER, "n": 2}, "n"),
        (CHAT, {"model": "m", "messages": [{"role": "user", "content": ""}]}, "messages"),
        (CHAT, {"model": "m", "messages": USER, "max_tokens": 40_000}, "max_tokens"),
        ("/v1/completions", {"model": "m", "prompt": ["a", "b"]}, "prompt"),
        ("/v1/completions", {"model": "m", "prompt": "word " * 33_000}, "max_tokens"),
        ("/v1/embeddings", {"model": "m", "input": ""}, "input"),
        ("/v1/embeddings", {"model": "m", "input": "x", "encoding_format": "hex"}, "encoding_format"),
    ],
)
def test_bad_requests_get_400_with_an_error_object(http, path, body, param):
    reply = http.post(path, body)
    assert reply.status == 400
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert isinstance(error["message"], str) and error["message"]
    assert error["param"] == param


def test_the_sdk_raises_bad_request(tiny_server):
    sdk = openai.OpenAI(base_url=tiny_server.base_url, api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError) as info:
        sdk.chat.completions.create(model="m", messages=[], max_tokens=1)
    assert "messages" in str(info.value)
