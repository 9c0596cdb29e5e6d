"""What each request kind sends beyond a prompt, drawn per request index (deterministic for a seed).

``build(factory, index, spec)`` returns ``spec`` with the kind's ``payload`` and ``input_units``
(what the kind counts: inputs, images, audio seconds, documents), made by the builder its spec
names (``surgelab.kinds``: one function here per kind with a payload):

| kind | payload | input_units |
|---|---|---|
| embeddings | tuple of input texts | inputs |
| vision | tuple of ``(data URL, width, height, detail)`` | images |
| transcription | ``(wav bytes, file name, seconds)`` | audio seconds |
| image_generation | ``{"n", "size"}`` | images asked for |
| rerank | tuple of document texts | documents |
| http | ``(method, path, body)`` with placeholders filled | — |
| flow | (the steps are in ``spec.steps``) | steps |
"""

from __future__ import annotations

import base64
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from surgelab.kinds import KINDS
from surgelab.scenario.workload import Audio, Documents, Images, RequestClass
from surgelab.workload.media import (
    IMAGE_MIME,
    folder_files,
    image_file_size,
    image_size,
    image_tokens,
    prepare_audio,
    prepare_images,
    synth_image,
    synth_wav,
    synth_wav_seconds,
    wav_file_seconds,
    wav_seconds,
)
from surgelab.workload.request import RequestSpec

if TYPE_CHECKING:
    from surgelab.workload.prompts import PromptFactory

__all__ = ["build", "prepare", "fill", "embeddings", "vision", "transcription", "image_generation", "rerank", "http",
           "flow", "prepare_vision", "prepare_transcription"]  # fmt: skip

_SPREAD = 1_000_033  # keeps the texts of one request's inputs apart from other requests'


def _draw(dist: Any, rng: np.random.Generator, low: int = 1) -> int:
    return max(int(np.rint(dist.sample(rng, 1)[0])), low)


def _draws(dist: Any, rng: np.random.Generator, n: int, low: int = 1) -> list[int]:
    """``n`` of ``_draw`` at once: the same values (numpy draws one after another either way), one call."""
    return np.maximum(np.rint(dist.sample(rng, n)), low).astype(np.int64).tolist() if n > 0 else []


def prepare(cls: RequestClass) -> None:
    """Pre-build what a class's media is cut from (the audio bed, the JPEG gradient: ~0.1–0.2 s once each),
    before the run starts rather than on the event loop at its first request."""
    spec = KINDS.get(cls.request_kind)
    if spec is not None and spec.prepare is not None:
        spec.hook("prepare")(cls)


def has_payload(kind: str | None) -> bool:
    """Whether requests of ``kind`` carry more than a prompt (``build`` gives them their payload)."""
    spec = KINDS.get(kind)
    return spec is not None and spec.builder is not None


def build(factory: PromptFactory, index: int, spec: RequestSpec, media: bool = True) -> RequestSpec:
    """``spec`` with its kind's payload; ``media=False`` leaves images, audio and the extra texts of a batch
    unmade (``payload`` None) but gives the same sizes, token counts and units — what ``surgelab preview``
    needs, at no synthesis cost."""
    kind = KINDS.get(factory.cls.request_kind)
    if kind is None or kind.builder is None:
        return spec
    rng = np.random.default_rng([*factory.key, 7, index])
    return kind.hook("builder")(factory, index, spec, rng, media)


def prepare_transcription(cls: RequestClass) -> None:
    if not (cls.audio and cls.audio.folder):
        prepare_audio((cls.audio or _default_audio()).sample_rate)


def prepare_vision(cls: RequestClass) -> None:
    images = cls.images or _default_images()
    if not images.folder and images.format == "jpeg":
        prepare_images(images.quality)


def embeddings(factory: PromptFactory, index: int, spec: RequestSpec, rng: np.random.Generator, media: bool) -> RequestSpec:
    c = factory.cls
    size = _draw(c.batch_size, rng)
    lengths = [spec.prompt_tokens - factory.system_tokens, *_draws(c.prompt_tokens, rng, size - 1)]
    texts = (spec.prompt, *(factory.text(index + j * _SPREAD, n) for j, n in enumerate(lengths[1:], 1))) if media else None
    return replace(spec, payload=texts, prompt_tokens=sum(lengths), input_units=float(size))


def vision(factory: PromptFactory, index: int, spec: RequestSpec, rng: np.random.Generator, media: bool) -> RequestSpec:
    images = factory.cls.images or _default_images()
    count = _draw(images.count, rng)
    parts, tokens = [], 0
    for k in range(count):
        if images.folder:
            files = folder_files(images.folder, (".png", ".jpg", ".jpeg"))
            path = files[(index * 7 + k) % len(files)]
            if media:
                data = path.read_bytes()
                mime = "image/png" if path.suffix.lower() == ".png" else "image/jpeg"
                width, height = image_size(data)
            else:
                width, height = image_file_size(path)
        else:
            width, height = _draw(images.width, rng, 16), _draw(images.height, rng, 16)
            if media:
                data = synth_image(width, height, images.format, images.quality, seed=index * 64 + k)
                mime = IMAGE_MIME[images.format]
        if media:
            parts.append((f"data:{mime};base64,{base64.b64encode(data).decode()}", width, height, images.detail))
        tokens += image_tokens(width, height, images.tokens, images.detail)
    payload = tuple(parts) if media else None
    return replace(spec, payload=payload, prompt_tokens=spec.prompt_tokens + tokens, input_units=float(count))


def transcription(factory: PromptFactory, index: int, spec: RequestSpec, rng: np.random.Generator, media: bool) -> RequestSpec:
    audio = factory.cls.audio or _default_audio()
    if audio.folder:
        files = folder_files(audio.folder, (".wav",))
        path = files[index % len(files)]
        if not media:
            return replace(spec, prompt="", prompt_tokens=0, input_units=wav_file_seconds(path))
        data, name = path.read_bytes(), path.name
    else:
        seconds = max(float(audio.seconds.sample(rng, 1)[0]), 0.1)
        if not media:
            return replace(spec, prompt="", prompt_tokens=0, input_units=synth_wav_seconds(seconds, audio.sample_rate))
        data, name = synth_wav(seconds, audio.sample_rate, seed=index), f"clip-{index}.wav"
    seconds = wav_seconds(data)
    return replace(spec, payload=(data, name, seconds), prompt="", prompt_tokens=0, input_units=seconds)


def image_generation(factory: PromptFactory, index: int, spec: RequestSpec, rng: np.random.Generator, media: bool) -> RequestSpec:
    images = factory.cls.images or _default_images()
    count = _draw(images.count, rng)
    size = f"{_draw(images.width, rng, 16)}x{_draw(images.height, rng, 16)}"
    return replace(spec, payload={"n": count, "size": size}, input_units=float(count))


def rerank(factory: PromptFactory, index: int, spec: RequestSpec, rng: np.random.Generator, media: bool) -> RequestSpec:
    docs = factory.cls.documents or _default_documents()
    count = _draw(docs.count, rng)
    lengths = _draws(docs.tokens, rng, count)
    texts = tuple(factory.text(index + (j + 1) * _SPREAD, n) for j, n in enumerate(lengths)) if media else None
    extra = spec.extra if docs.top_n is None else {**spec.extra, "top_n": docs.top_n}
    return replace(spec, payload=texts, prompt_tokens=spec.prompt_tokens + sum(lengths), input_units=float(count), extra=extra)


def http(factory: PromptFactory, index: int, spec: RequestSpec, rng: np.random.Generator, media: bool) -> RequestSpec:
    c = factory.cls
    assert c.http is not None
    template = c.http.resolved
    values = {"prompt": spec.prompt, "prompt_tokens": spec.prompt_tokens, "max_tokens": spec.max_tokens,
              "index": index, "request_class": c.name}  # fmt: skip
    return replace(spec, payload=(template.method, template.path, template.body, dict(template.headers), values))


def flow(factory: PromptFactory, index: int, spec: RequestSpec, rng: np.random.Generator, media: bool) -> RequestSpec:
    steps = tuple(step.spec(index, media=media) for step in factory.steps)
    return replace(spec, steps=steps, prompt_tokens=sum(s.prompt_tokens for s in steps), input_units=float(len(steps)))


def fill(template: Any, values: dict[str, Any]) -> Any:
    """``template`` with ``{name}`` placeholders replaced; a string that is one placeholder keeps the value's type."""
    if isinstance(template, str):
        if template.startswith("{") and template.endswith("}") and template[1:-1] in values:
            return values[template[1:-1]]
        for name, value in values.items():
            template = template.replace("{" + name + "}", str(value))
        return template
    if isinstance(template, list):
        return [fill(item, values) for item in template]
    if isinstance(template, dict):
        return {key: fill(item, values) for key, item in template.items()}
    return template


def _default_images() -> Images:
    return Images()


def _default_audio() -> Audio:
    return Audio()


def _default_documents() -> Documents:
    return Documents()
