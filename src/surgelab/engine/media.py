"""What non-text requests cost the engine, as tokens it knows how to time.

The engine times prefill (compute-bound) and decode (memory-bound) tokens; every other kind
is mapped onto those, so a mixed scenario on one replica shares one batch and one KV cache
and shows the interference the seeds describe (docs/kinds.md, docs/engine.md):

* vision — image tokens (``surgelab.workload.media.image_tokens``, OpenAI's tile rule on
  the server) are added to the prompt: bigger images, longer prefills, slower steps for all.
* transcription — an encoder-decoder (Whisper): 50 encoder positions per audio second
  (30 s of audio is 3000 mel frames, 1500 positions after the stride-2 convolution;
  Radford et al. 2022, §2.2) prefilled, then the transcript decoded at 2.5 tokens per
  audio second (speech at 150 words a minute, one token a word).
* embeddings — one prefill of the batch's tokens and a single step out.
* image_generation — a diffusion transformer (SD3, Flux): the VAE downsamples 8× and latents
  are patched 2×2, so one token per 16×16 pixels; every denoising step is a full forward
  pass over those tokens (a prefill with one output token), ``steps`` times in a row.
* rerank — a cross-encoder: one prefill over query + each document.
* speech — text prefilled, then audio tokens decoded at 25 per output second (a 25 Hz
  speech-token codec, as in CosyVoice), the output lasting 1 s per 2.5 input words.
"""

from __future__ import annotations

import math

__all__ = [
    "ENCODER_TOKENS_PER_AUDIO_S", "TRANSCRIPT_TOKENS_PER_AUDIO_S", "DIFFUSION_PATCH_PX", "DEFAULT_DIFFUSION_STEPS",
    "SPEECH_TOKENS_PER_S", "SPEECH_WORDS_PER_S", "transcription_tokens", "diffusion_tokens", "speech_tokens",
]  # fmt: skip

ENCODER_TOKENS_PER_AUDIO_S = 50.0
TRANSCRIPT_TOKENS_PER_AUDIO_S = 2.5
DIFFUSION_PATCH_PX = 16
DEFAULT_DIFFUSION_STEPS = 20
SPEECH_TOKENS_PER_S = 25.0
SPEECH_WORDS_PER_S = 2.5


def transcription_tokens(seconds: float) -> tuple[int, int]:
    """(encoder tokens to prefill, transcript tokens to decode) for ``seconds`` of audio."""
    return max(1, math.ceil(seconds * ENCODER_TOKENS_PER_AUDIO_S)), max(1, round(seconds * TRANSCRIPT_TOKENS_PER_AUDIO_S))


def diffusion_tokens(width: int, height: int, n: int = 1) -> int:
    """Latent tokens one denoising step processes for ``n`` images of ``width`` × ``height``."""
    return n * math.ceil(width / DIFFUSION_PATCH_PX) * math.ceil(height / DIFFUSION_PATCH_PX)


def speech_tokens(words: int, speed: float = 1.0) -> tuple[float, int]:
    """(audio seconds, audio tokens to decode) for ``words`` of input text read at ``speed``."""
    seconds = max(words, 1) / SPEECH_WORDS_PER_S / speed
    return seconds, max(1, math.ceil(seconds * SPEECH_TOKENS_PER_S))
