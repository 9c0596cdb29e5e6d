"""The official openai SDK accepts the embedded server's answers for the non-text kinds."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from surgelab.engine.media import speech_tokens, transcription_tokens
from surgelab.workload.media import synth_wav

openai = pytest.importorskip("openai")


@pytest.fixture(scope="module")
def sdk(embedded):
    return openai.OpenAI(base_url=embedded, api_key="unused", max_retries=0, timeout=30)


def test_embeddings_of_a_batch(sdk):
    reply = sdk.embeddings.create(model="surgelab-tiny", input=["one two three", "four five", "six"])
    assert [d.index for d in reply.data] == [0, 1, 2]
    assert len({len(d.embedding) for d in reply.data}) == 1
    assert reply.usage.prompt_tokens == 6


def test_transcription_of_a_wav(sdk):
    reply = sdk.audio.transcriptions.create(model="surgelab-tiny", file=("clip.wav", synth_wav(4.0), "audio/wav"))
    _encoder, words = transcription_tokens(4.0)
    assert len(reply.text.split()) == words
    text = sdk.audio.transcriptions.create(model="surgelab-tiny", file=("c.wav", synth_wav(1.0)), response_format="text")
    assert isinstance(text, str) and text.strip()


def test_image_generation_size_and_count(sdk):
    reply = sdk.images.generate(model="surgelab-tiny", prompt="a lighthouse at dusk", n=2, size="256x128")
    assert len(reply.data) == 2
    image = Image.open(io.BytesIO(base64.b64decode(reply.data[0].b64_json)))
    assert image.size == (256, 128)


def test_speech_is_a_wav_of_the_predicted_length(sdk):
    text = "one two three four five six seven eight nine ten"
    reply = sdk.audio.speech.create(model="surgelab-tiny", voice="alloy", input=text, response_format="wav")
    data = reply.content
    seconds, _ = speech_tokens(10)
    assert data[:4] == b"RIFF" and (len(data) - 44) / (2 * 24000) == pytest.approx(seconds, abs=1e-3)


def test_bad_requests_are_openai_errors(sdk):
    with pytest.raises(openai.BadRequestError, match="size"):
        sdk.images.generate(model="surgelab-tiny", prompt="x", size="big")
    with pytest.raises(openai.BadRequestError, match="WAV"):
        sdk.audio.transcriptions.create(model="surgelab-tiny", file=("x.mp3", b"ID3not really audio"))
