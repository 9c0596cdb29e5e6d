"""Media for vision and transcription requests: synthesised images and audio, or files, and their token cost.

Images are synthesised with Pillow: a smooth gradient with a per-request pattern of blocks,
so every image is different (multimodal caches keyed on the image hash cannot flatter a run)
while encoding stays cheap. Audio is a 16-bit mono WAV written with the stdlib ``wave``
module: tones plus noise, cut from a signal generated once with numpy (a clip is a copy, so
transcription load is never limited by making its audio). ``synth_wav_seconds`` and
``image_tokens`` give sizes without making anything (``surgelab preview``).

Image-token formulas (``images.tokens``), all documented in docs/kinds.md:

* ``openai`` — OpenAI's tile rule for GPT-4o-class models: ``detail: low`` costs 85 tokens;
  otherwise the image is scaled to fit in 2048×2048, then so its shorter side is 768 px,
  and costs 85 + 170 per 512-px tile (https://platform.openai.com/docs/guides/images-vision,
  "Calculating costs").
* ``qwen2vl`` — Qwen2-VL: 14-px ViT patches merged 2×2, so one token per 28×28 px, sides
  rounded to multiples of 28 (arXiv:2409.12191, §2.1).
* ``patch14`` — one token per 14×14 patch, no merging (a plain ViT-L/14 encoder, as in CLIP).
"""

from __future__ import annotations

import io
import math
import wave
from functools import lru_cache
from pathlib import Path

import numpy as np

__all__ = [
    "image_tokens", "synth_image", "image_size", "image_file_size", "synth_wav", "synth_wav_seconds", "prepare_audio", "wav_seconds",
    "wav_file_seconds", "folder_files", "IMAGE_MIME",
]  # fmt: skip

IMAGE_MIME = {"png": "image/png", "jpeg": "image/jpeg"}


def image_tokens(width: int, height: int, rule: str = "openai", detail: str = "auto") -> int:
    """Estimated prompt tokens of one image of ``width`` × ``height`` pixels."""
    if rule == "qwen2vl":
        return max(1, round(width / 28)) * max(1, round(height / 28))
    if rule == "patch14":
        return math.ceil(width / 14) * math.ceil(height / 14)
    if detail == "low":
        return 85
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        scale = 2048 / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > 768:
        scale = 768 / min(w, h)
        w, h = w * scale, h * scale
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


@lru_cache(maxsize=16)
def _gradient(width: int, height: int) -> np.ndarray:
    x = np.linspace(0, 255, width, dtype=np.float32)
    y = np.linspace(0, 255, height, dtype=np.float32)[:, None]
    rgb = np.stack([np.broadcast_to(x, (height, width)), np.broadcast_to(y, (height, width)),
                    np.broadcast_to((x + y) / 2, (height, width))], axis=-1)  # fmt: skip
    return rgb.astype(np.uint8)


def synth_image(width: int, height: int, fmt: str = "jpeg", quality: int = 85, seed: int = 0) -> bytes:
    """A ``width`` × ``height`` image, unique to ``seed``, encoded as PNG or JPEG (``quality``)."""
    from PIL import Image  # heavy and optional: only for image kinds

    pixels = _gradient(width, height).copy()
    rng = np.random.default_rng(seed)
    cell = max(8, min(width, height) // 8)
    for _ in range(6):  # a few coloured blocks make each image distinct
        x0, y0 = int(rng.integers(0, max(width - cell, 1))), int(rng.integers(0, max(height - cell, 1)))
        pixels[y0 : y0 + cell, x0 : x0 + cell] = rng.integers(0, 256, size=3, dtype=np.uint8)
    buffer = io.BytesIO()
    image = Image.fromarray(pixels, "RGB")
    if fmt == "png":
        image.save(buffer, format="PNG", compress_level=1)
    else:
        image.save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()


def image_size(data: bytes) -> tuple[int, int]:
    """Width and height of an encoded image, read from its header only."""
    from PIL import Image  # heavy and optional: only for image kinds

    with Image.open(io.BytesIO(data)) as image:
        return image.size


_BED_SECONDS = 32  # the pre-built signal clips are cut from (per sample rate)
_STAMP = 8  # leading samples that carry the clip's seed, so no two clips are the same bytes


@lru_cache(maxsize=4)
def _audio_bed(sample_rate: int) -> np.ndarray:
    """``_BED_SECONDS`` of 16-bit audio, built once: three tones that change pitch every second, and noise."""
    n = _BED_SECONDS * sample_rate
    rng = np.random.default_rng(0x5EED)
    t = np.arange(n, dtype=np.float32) / sample_rate
    pitches = rng.uniform(120, 900, size=(_BED_SECONDS, 3)).astype(np.float32)
    per_sample = np.repeat(pitches, sample_rate, axis=0)
    signal = np.sin(2 * np.pi * per_sample * t[:, None]).sum(axis=1) / 4
    signal += rng.normal(0, 0.05, size=n).astype(np.float32)
    return (np.clip(signal, -1, 1) * 32000).astype("<i2")


def prepare_audio(sample_rate: int = 16000) -> None:
    """Build the signal ``synth_wav`` cuts clips from now (it is kept for the process's life)."""
    _audio_bed(sample_rate)


def synth_wav_frames(seconds: float, sample_rate: int = 16000) -> int:
    """Samples in the clip ``synth_wav(seconds, sample_rate)`` makes."""
    return max(1, round(seconds * sample_rate))


def synth_wav_seconds(seconds: float, sample_rate: int = 16000) -> float:
    """The exact duration of ``synth_wav(seconds, sample_rate)``, without making it."""
    return synth_wav_frames(seconds, sample_rate) / float(sample_rate)


def synth_wav(seconds: float, sample_rate: int = 16000, seed: int = 0) -> bytes:
    """A 16-bit mono WAV of ``seconds``: tones and noise, unique to ``seed``.

    Cut from a pre-built signal at a place ``seed`` picks (looped when longer), its first samples
    spelling ``seed``: a copy, not a synthesis, so making clips never limits the client's rate
    (benchmarks/RESULTS.md, "Media at run time").
    """
    n = synth_wav_frames(seconds, sample_rate)
    bed = _audio_bed(sample_rate)
    start = int(np.random.default_rng([seed, 11]).integers(0, bed.size))
    pieces, need = [], n
    while need > 0:
        piece = bed[start : start + need]
        pieces.append(piece)
        need -= piece.size
        start = 0
    samples = np.concatenate(pieces) if len(pieces) > 1 else pieces[0].copy()
    stamp = np.frombuffer(int(seed % (1 << 64)).to_bytes(8, "little") * 2, dtype="<i2")[: min(_STAMP, n)]
    samples[: stamp.size] = stamp
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(sample_rate)
        out.writeframes(samples.tobytes())
    return buffer.getvalue()


def wav_seconds(data: bytes) -> float:
    """Duration of a WAV file (wave.Error if it is not one)."""
    with wave.open(io.BytesIO(data), "rb") as clip:
        return clip.getnframes() / float(clip.getframerate())


def wav_file_seconds(path: Path) -> float:
    """Duration of a WAV file on disk, from its header only."""
    with wave.open(str(path), "rb") as clip:
        return clip.getnframes() / float(clip.getframerate())


def image_file_size(path: Path) -> tuple[int, int]:
    """Width and height of an image file, from its header only."""
    from PIL import Image  # heavy and optional: only for image kinds

    with Image.open(path) as image:
        return image.size


@lru_cache(maxsize=8)
def folder_files(folder: str, suffixes: tuple[str, ...]) -> tuple[Path, ...]:
    """The files of ``folder`` with one of ``suffixes``, in name order."""
    files = tuple(sorted(p for p in Path(folder).iterdir() if p.suffix.lower() in suffixes))
    if not files:
        raise ValueError(f"no {'/'.join(suffixes)} files in {folder}")
    return files
