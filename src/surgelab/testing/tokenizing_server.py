"""A chat server that counts prompts the way real engines do: a trained BPE and a chat template.

The scripted server counts with surgelab's own tokenizer, so it agrees with the client by
construction. This one does not: a byte-level BPE trained at start-up on two-letter syllables
(most of the built-in tokenizer's four-letter words are two tokens to it) and a ChatML
template around the messages, as vLLM and llama.cpp apply them. ``--dialect`` picks how it
offers its tokenizer: ``vllm`` (``POST /tokenize`` with ``prompt``/``messages``,
``return_token_strs``), ``llamacpp`` (``content``, ``with_pieces``, ``POST /apply-template``) or
``none``. ``usage.prompt_tokens`` is always its own count. Needs the ``tokenizers`` package.
"""

from __future__ import annotations

import itertools
import random
import time

import orjson
from aiohttp import web

from surgelab.testing.serving import run_until_interrupted, serve_app, server_argument_parser

__all__ = ["make_app", "train_tokenizer", "render_chat"]

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


def train_tokenizer():  # -> tokenizers.Tokenizer (an optional dependency, imported here)
    """A byte-level BPE on syllable words: deterministic, a second or so to train."""
    import tokenizers  # the hf extra; only this test server needs it

    tok = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token="<|endoftext|>"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    syllables = [c + v for c, v in itertools.product("bdfgklmnprstvz", "aeiou")]
    rng = random.Random(0)
    corpus = [" ".join(rng.choice(syllables) for _ in range(60)) for _ in range(300)]
    corpus += ["hello world the assistant user system answer question"] * 20
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=400, special_tokens=list(SPECIALS), initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(corpus, trainer)
    return tok


def render_chat(messages: list[dict]) -> str:
    """ChatML with the generation prompt, as Qwen's and many other templates write it."""
    turns = "".join(f"<|im_start|>{m.get('role')}\n{m.get('content') or ''}<|im_end|>\n" for m in messages)
    return turns + "<|im_start|>assistant\n"


def make_app(dialect: str) -> web.Application:
    tok = train_tokenizer()

    def ids(text: str) -> list[int]:
        return tok.encode(text, add_special_tokens=False).ids

    def answer(body: dict) -> web.Response:
        return web.Response(body=orjson.dumps(body), content_type="application/json")

    async def tokenize(request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        if dialect == "vllm" and ("prompt" in body or "messages" in body):
            text = render_chat(body["messages"]) if "messages" in body else body["prompt"]
            encoded = tok.encode(text, add_special_tokens=False)
            reply = {"count": len(encoded.ids), "max_model_len": 4096, "tokens": encoded.ids}
            if body.get("return_token_strs"):
                reply["token_strs"] = encoded.tokens
            return answer(reply)
        if dialect == "llamacpp":
            encoded = tok.encode(body.get("content", ""), add_special_tokens=False)
            if body.get("with_pieces"):
                pieces = [{"id": i, "piece": tok.decode([i])} for i in encoded.ids]
                return answer({"tokens": pieces})
            return answer({"tokens": encoded.ids})
        return web.Response(status=400, text="unsupported tokenize request")

    async def apply_template(request: web.Request) -> web.Response:
        return answer({"prompt": render_chat(orjson.loads(await request.read())["messages"])})

    async def chat(request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        prompt = len(ids(render_chat(body["messages"])))
        n = int(body.get("max_tokens") or 16)
        usage = {"prompt_tokens": prompt, "completion_tokens": n, "total_tokens": prompt + n}
        if not body.get("stream"):
            message = {"role": "assistant", "content": " ba" * n}
            return answer({"id": "t", "object": "chat.completion", "created": int(time.time()), "model": body["model"],
                           "choices": [{"index": 0, "message": message, "finish_reason": "length"}], "usage": usage})  # fmt: skip
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for k in range(n):
            choice = {"index": 0, "delta": {"content": " ba"}, "finish_reason": "length" if k == n - 1 else None}
            await resp.write(b"data: " + orjson.dumps({"choices": [choice]}) + b"\n\n")
        await resp.write(b"data: " + orjson.dumps({"choices": [], "usage": usage}) + b"\n\ndata: [DONE]\n\n")
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    if dialect != "none":
        app.router.add_post("/tokenize", tokenize)
    if dialect == "llamacpp":
        app.router.add_post("/apply-template", apply_template)
    return app


def main(argv: list[str] | None = None) -> None:
    parser = server_argument_parser(__doc__)
    parser.add_argument("--dialect", choices=("vllm", "llamacpp", "none"), default="vllm")
    args = parser.parse_args(argv)
    run_until_interrupted(serve_app(make_app(args.dialect), args.host, args.port))


if __name__ == "__main__":
    main()
