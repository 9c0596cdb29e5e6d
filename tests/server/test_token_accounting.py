"""Token counts agree exactly with ``BuiltinTokenizer``, on both sides of the wire."""

from __future__ import annotations

import pytest

from surgelab.tokenizer import BuiltinTokenizer

TOKENIZER = BuiltinTokenizer()
CHAT = "/v1/chat/completions"


def chat(messages, **extra):
    return {"model": "surgelab-tiny", "messages": messages, **extra}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("max_tokens", [1, 2, 37, 300])
def test_ignore_eos_gives_exactly_max_tokens(http, stream, max_tokens):
    body = chat(
        [{"role": "user", "content": "go"}],
        max_tokens=max_tokens,
        ignore_eos=True,
        stream=stream,
        stream_options={"include_usage": True} if stream else None,
    )
    reply = http.post(CHAT, body)
    assert reply.status == 200
    if stream:
        *chunks, last = reply.events()
        pieces = [c["choices"][0]["delta"]["content"] for c in chunks]
        assert len(pieces) == max_tokens == last["usage"]["completion_tokens"]
        assert all(TOKENIZER.count(p) == 1 for p in pieces)
        assert TOKENIZER.count("".join(pieces)) == max_tokens
        assert [c["choices"][0]["finish_reason"] for c in chunks][-1] == "length"
    else:
        data = reply.json()
        assert data["usage"]["completion_tokens"] == max_tokens
        assert TOKENIZER.count(data["choices"][0]["message"]["content"]) == max_tokens


def test_prompt_tokens_are_the_tokenizer_count_of_every_text_part(http):
    messages = [
        {"role": "system", "content": "Be brief; answer in ≤ 3 words."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look at this:"},
                {"type": "image_url", "image_url": {"url": "data:,"}},
                {"type": "text", "text": " 12345 apples!!"},
            ],
        },
        {"role": "assistant", "content": None},
        {"role": "user", "content": "\n\nand   then?\t"},
    ]
    expected = sum(
        TOKENIZER.count(t)
        for t in ("Be brief; answer in ≤ 3 words.", "Look at this:", " 12345 apples!!", "\n\nand   then?\t")
    )
    reply = http.post(CHAT, chat(messages, max_tokens=2))
    assert reply.json()["usage"]["prompt_tokens"] == expected
    prompt = "Tokenise me: naïve café, 3.14159 and __init__."
    reply = http.post("/v1/completions", {"model": "surgelab-tiny", "prompt": prompt, "max_tokens": 1})
    assert reply.json()["usage"]["prompt_tokens"] == TOKENIZER.count(prompt)
    reply = http.post("/v1/completions", {"model": "surgelab-tiny", "prompt": [5, 6, 7], "max_tokens": 1})
    assert reply.json()["usage"]["prompt_tokens"] == 3


def test_natural_lengths_respect_max_and_min_tokens_and_are_deterministic_per_seed(http):
    lengths, reasons = [], set()
    for seed in range(40):
        data = http.post(
            CHAT, chat([{"role": "user", "content": "hi"}], max_tokens=150, min_tokens=5, seed=seed)
        ).json()
        n = data["usage"]["completion_tokens"]
        assert 5 <= n <= 150
        assert TOKENIZER.count(data["choices"][0]["message"]["content"]) == n
        reason = data["choices"][0]["finish_reason"]
        assert reason == ("length" if n == 150 else "stop")
        lengths.append(n)
        reasons.add(reason)
    assert len(set(lengths)) > 10 and reasons == {"stop", "length"}
    again = http.post(CHAT, chat([{"role": "user", "content": "hi"}], max_tokens=150, min_tokens=5, seed=3)).json()
    first = http.post(CHAT, chat([{"role": "user", "content": "hi"}], max_tokens=150, min_tokens=5, seed=3)).json()
    assert again["choices"][0]["message"] == first["choices"][0]["message"]


def test_max_completion_tokens_wins_over_max_tokens(http):
    body = chat([{"role": "user", "content": "x"}], max_tokens=50, max_completion_tokens=4, ignore_eos=True)
    assert http.post(CHAT, body).json()["usage"]["completion_tokens"] == 4


def test_tokenize_counts_as_the_completions_do(http):
    """vLLM's /tokenize, so clients can calibrate: the same count the chat usage reports."""
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": " baba bebe, hello world!"}]
    counted = http.post("/tokenize", {"model": "surgelab-tiny", "messages": messages, "return_token_strs": True}).json()
    usage = http.post(CHAT, chat(messages, max_tokens=1)).json()["usage"]
    assert counted["count"] == usage["prompt_tokens"] == len(counted["tokens"]) == len(counted["token_strs"])
    assert "".join(counted["token_strs"]) == "be brief baba bebe, hello world!"
    prompt = http.post("/tokenize", {"model": "surgelab-tiny", "prompt": " baba bebe"}).json()
    assert prompt["count"] == 2 and "token_strs" not in prompt
    assert http.post("/tokenize", {"model": "surgelab-tiny"}).status == 400


def test_a_client_learns_that_this_server_counts_as_the_builtin_tokenizer(tiny_server):
    from surgelab.aio import run_async
    from surgelab.client.tokenize import learn_tokenizer
    from surgelab.scenario.model import Target

    learned = run_async(learn_tokenizer(Target(url=tiny_server.root_url + "/v1", model="surgelab-tiny"), {}))
    assert learned.builtin_agrees, learned.note
