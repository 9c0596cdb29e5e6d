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
        (CHAT, {"model": "surgelab-tiny"}, "messages"),
        (CHAT, {"model": "surgelab-tiny", "messages": []}, "messages"),
        (CHAT, {"model": "surgelab-tiny", "messages": ["hi"]}, "messages[0]"),
        (CHAT, {"model": "surgelab-tiny", "messages": [{"role": "user", "content": 5}]}, "messages[0]"),
        (CHAT, {"model": "surgelab-tiny", "messages": USER, "max_tokens": 0}, "max_tokens"),
        (CHAT, {"model": "surgelab-tiny", "messages": USER, "max_tokens": "ten"}, "max_tokens"),
        (CHAT, {"model": "surgelab-tiny", "messages": USER, "max_tokens": 3, "min_tokens": 9}, "min_tokens"),
        (CHAT, {"model": "surgelab-tiny", "messages": USER, "n": 2}, "n"),
        (CHAT, {"model": "surgelab-tiny", "messages": [{"role": "user", "content": ""}]}, "messages"),
        (CHAT, {"model": "surgelab-tiny", "messages": USER, "max_tokens": 40_000}, "max_tokens"),
        ("/v1/completions", {"model": "surgelab-tiny", "prompt": ["a", "b"]}, "prompt"),
        ("/v1/completions", {"model": "surgelab-tiny", "prompt": "word " * 33_000}, "max_tokens"),
        ("/v1/embeddings", {"model": "surgelab-tiny", "input": ""}, "input"),
        ("/v1/embeddings", {"model": "surgelab-tiny", "input": "x", "encoding_format": "hex"}, "encoding_format"),
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
        sdk.chat.completions.create(model="surgelab-tiny", messages=[], max_tokens=1)
    assert "messages" in str(info.value)


def test_a_model_the_server_does_not_serve_is_vllms_404(http):
    """``surgelab serve`` answered any model name; vLLM answers 404 ``The model `x` does not exist.``"""
    reply = http.post(CHAT, {"model": "gpt-4o", "messages": USER, "max_tokens": 1})
    assert reply.status == 404
    assert reply.json()["error"] == {"message": "The model `gpt-4o` does not exist.", "type": "NotFoundError",
                                      "param": "model", "code": 404}  # fmt: skip
    assert http.post("/v1/embeddings", {"model": "text-embedding-3-small", "input": "x"}).status == 404
    assert http.post(CHAT, {"messages": USER, "max_tokens": 1}).status == 200  # no model: the one served
    assert http.post(CHAT, {"model": 7, "messages": USER, "max_tokens": 1}).status == 400


def test_the_sdk_raises_not_found_for_another_model(tiny_server):
    sdk = openai.OpenAI(base_url=tiny_server.base_url, api_key="x", max_retries=0)
    with pytest.raises(openai.NotFoundError, match="The model `gpt-4o` does not exist"):
        sdk.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}], max_tokens=1)


def test_a_nested_multipart_part_in_a_transcription_form_is_a_400(http):
    """A form part that is itself multipart has no field name or bytes to read: it was a 500."""
    import urllib.request

    body = (b'--outer\r\nContent-Disposition: form-data; name="file"\r\n'
            b"Content-Type: multipart/mixed; boundary=inner\r\n\r\n"
            b"--inner\r\nContent-Type: application/octet-stream\r\n\r\nabc\r\n--inner--\r\n\r\n--outer--\r\n")  # fmt: skip
    request = urllib.request.Request(
        http.root + "/v1/audio/transcriptions", data=body, method="POST",
        headers={"Content-Type": "multipart/form-data; boundary=outer"},
    )  # fmt: skip
    reply = http._send(request, 10.0)
    assert reply.status == 400
    assert "nested multipart" in reply.json()["error"]["message"]
