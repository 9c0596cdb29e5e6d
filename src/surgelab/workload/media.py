"""Media for vision and transcription requests: synthesised images and audio, or files, and their token cost.

Images are synthesised: a smooth gradient whose top strip is a row of tiles in colours drawn
from the request, so every image differs in its pixels (multimodal caches keyed on the image
hash cannot flatter a run). A JPEG is assembled from a gradient encoded once (Pillow) with a
restart marker after every MCU — each MCU then stands alone, so a crop of it is a list of
them — with only the seed's tiles encoded per request; a PNG is written directly (Up-filtered
rows, zlib). Audio is a 16-bit mono WAV written with the stdlib ``wave`` module: tones plus
noise, cut from a signal generated once with numpy. Making media is a copy, not a synthesis,
so it never limits the client's rate (benchmarks/RESULTS.md, "Media at run time");
``synth_wav_seconds`` and ``image_tokens`` give sizes without making anything (``surgelab
preview``).

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
import re
import struct
import wave
import zlib
from functools import lru_cache
from pathlib import Path

import numpy as np

__all__ = [
    "image_tokens", "synth_image", "image_size", "image_file_size", "synth_wav", "synth_wav_seconds", "prepare_audio", "prepare_images", "wav_seconds",
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
    """A ``width`` × ``height`` image, unique to ``seed``, encoded as PNG or JPEG (``quality``).

    A gradient whose top strip is a row of tiles in colours drawn from ``seed``, so every image
    differs in its pixels. A JPEG (up to 2048 px a side) is not encoded whole per request: it is
    assembled from the standalone MCUs of a gradient encoded once with a restart marker after
    every MCU, its first tiles encoded for this seed (about 1 ms where encoding took 14–32 ms).
    A PNG is its rows, Up-filtered (a gradient's rows then repeat), through zlib's fastest level.
    """
    if fmt == "png":
        return _png(_pixels(width, height, seed))
    if max(width, height) > _JPEG_BASE:
        return _jpeg(_pixels(width, height, seed), quality)
    return _JpegBase.of(quality).assemble(width, height, seed)


_TILE = 16  # a JPEG MCU with 4:2:0 chroma: 16 × 16 pixels
_JPEG_BASE = 2048  # the side of the gradient JPEGs are cut from (OpenAI scales images to fit 2048 × 2048)
_STAMP_TILES = 8  # seed-coloured tiles at the top left: 8 × 24 bits, no two seeds alike


def _stamp(seed: int, tiles: int) -> np.ndarray:
    """``tiles`` solid 16 × 16 tiles side by side, in colours drawn from ``seed``."""
    colours = np.random.default_rng([seed, 13]).integers(0, 256, size=(tiles, 3), dtype=np.uint8)
    return np.repeat(np.repeat(colours[None, :, :], _TILE, axis=0), _TILE, axis=1)


def _pixels(width: int, height: int, seed: int) -> np.ndarray:
    pixels = _gradient(width, height).copy()
    stamp = _stamp(seed, _STAMP_TILES)[:height, :width]
    pixels[: stamp.shape[0], : stamp.shape[1]] = stamp
    return pixels


def _jpeg(pixels: np.ndarray, quality: int, restart: bool = False) -> bytes:
    from PIL import Image  # heavy and optional: only for image kinds

    buffer = io.BytesIO()
    options = {"restart_marker_blocks": 1} if restart else {}
    Image.fromarray(pixels, "RGB").save(buffer, format="JPEG", quality=quality, subsampling=2, **options)
    return buffer.getvalue()


def _png(pixels: np.ndarray) -> bytes:
    height, width, _ = pixels.shape
    flat = pixels.reshape(height, width * 3)
    rows = np.full((height, width * 3 + 1), 2, dtype=np.uint8)  # each row: filter type 2 (Up), then its bytes
    rows[0, 1:] = flat[0]  # the row above the first is zeros
    np.subtract(flat[1:], flat[:-1], out=rows[1:, 1:])  # modulo 256, as PNG's filter is

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    idat = zlib.compress(rows.tobytes(), 1)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


_RST = [bytes([0xFF, 0xD0 + k]) for k in range(8)]


class _JpegBase:
    """A gradient JPEG of ``_JPEG_BASE`` px a side with a restart marker after every MCU: each MCU's
    entropy-coded data stands alone, so any top-left crop is a list of them, renumbered."""

    _cache: dict[int, _JpegBase] = {}

    def __init__(self, quality: int) -> None:
        data = _jpeg(_gradient(_JPEG_BASE, _JPEG_BASE), quality, restart=True)
        self.quality = quality
        self.head, segments = _scan_segments(data)
        self.sof = _frame_header(self.head)  # its size is patched per image
        side = _JPEG_BASE // _TILE
        self.rows = [segments[r * side : (r + 1) * side] for r in range(side)]

    @classmethod
    def of(cls, quality: int) -> _JpegBase:
        if quality not in cls._cache:
            cls._cache[quality] = cls(quality)
        return cls._cache[quality]

    def assemble(self, width: int, height: int, seed: int) -> bytes:
        cols, rows = -(-width // _TILE), -(-height // _TILE)
        tiles = min(cols, _STAMP_TILES)
        _, stamp = _scan_segments(_jpeg(_stamp(seed, tiles), self.quality, restart=True))
        head = bytearray(self.head)
        head[self.sof + 5 : self.sof + 9] = struct.pack(">HH", height, width)
        pieces: list[bytes] = [bytes(head)]
        i = 0
        for r in range(rows):
            row = self.rows[r]
            for c in range(cols):
                if i:
                    pieces.append(_RST[(i - 1) & 7])
                pieces.append(stamp[c] if r == 0 and c < tiles else row[c])
                i += 1
        pieces.append(b"\xff\xd9")
        return b"".join(pieces)


def _frame_header(head: bytes) -> int:
    """Where the frame header (SOF0) starts, found by walking the marker segments from the start."""
    pos = 2  # after SOI
    while head[pos + 1] != 0xC0:
        pos += 2 + struct.unpack(">H", head[pos + 2 : pos + 4])[0]
    return pos


def _scan_segments(data: bytes) -> tuple[bytes, list[bytes]]:
    """A JPEG's headers up to its scan data, and the scan data split at its restart markers."""
    sos = data.index(b"\xff\xda")
    start = sos + 2 + struct.unpack(">H", data[sos + 2 : sos + 4])[0]
    end = data.rindex(b"\xff\xd9")
    return data[:start], re.split(rb"\xff[\xd0-\xd7]", data[start:end])


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


def prepare_images(quality: int = 85) -> None:
    """Encode the gradient JPEGs of ``quality`` are assembled from now (~0.1 s; kept for the process's life)."""
    _JpegBase.of(quality)


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
