"""Image-token formulas (worked examples from their sources), synthesised media, and specs by kind."""

from __future__ import annotations

import pytest

from surgelab.scenario.loader import build_scenario
from surgelab.workload.media import image_size, image_tokens, synth_image, synth_wav, wav_seconds
from surgelab.workload.prompts import WorkloadSampler


@pytest.mark.parametrize(
    ("width", "height", "rule", "detail", "tokens"),
    [
        (1024, 1024, "openai", "high", 765),  # OpenAI's worked example: 768×768, 4 tiles
        (2048, 4096, "openai", "high", 1105),  # → 1024×2048 → 768×1536, 6 tiles
        (4096, 8192, "openai", "low", 85),
        (512, 512, "openai", "auto", 255),  # one tile
        (448, 448, "qwen2vl", "auto", 256),  # 16 × 16 merged patches
        (224, 224, "patch14", "auto", 256),  # ViT-L/14 at 224 px: 16 × 16 patches
    ],
)
def test_image_token_formulas(width, height, rule, detail, tokens):
    assert image_tokens(width, height, rule, detail) == tokens


@pytest.mark.parametrize("fmt", ["png", "jpeg"])
def test_synthesised_images_have_their_size_and_differ(fmt):
    a, b = synth_image(320, 200, fmt, 70, seed=1), synth_image(320, 200, fmt, 70, seed=2)
    assert image_size(a) == (320, 200) and a != b
    assert a[:4] == (b"\x89PNG" if fmt == "png" else b"\xff\xd8\xff\xe0")


def test_synthesised_audio_lasts_what_was_asked():
    assert wav_seconds(synth_wav(2.5, 16000, seed=3)) == pytest.approx(2.5)
    assert synth_wav(1.0, seed=1) != synth_wav(1.0, seed=2)


def test_specs_by_kind_are_deterministic_and_sized():
    data = {
        "target": {"url": "http://127.0.0.1:9/v1", "model": "m"},
        "load": {"rate": 1},
        "workload": {"mix": [
            {"name": "e", "kind": "embeddings", "batch_size": 3, "prompt_tokens": 10},
            {"name": "v", "kind": "vision", "images": {"count": 2, "width": 100, "height": 50}, "prompt_tokens": 5},
            {"name": "t", "kind": "transcription", "audio": {"seconds": 1.5}},
            {"name": "r", "kind": "rerank", "documents": {"count": 4, "tokens": 7}, "prompt_tokens": 3},
        ]},
    }  # fmt: skip
    workload = build_scenario(data, source="s").workload
    one, two = WorkloadSampler(workload, seed=5), WorkloadSampler(workload, seed=5)
    seen = set()
    for i in range(40):
        spec = one.spec(i)
        assert spec == two.spec(i)
        seen.add(spec.kind)
        if spec.kind == "embeddings":
            assert len(spec.payload) == 3 and spec.prompt_tokens == 30 and spec.input_units == 3
        elif spec.kind == "vision":
            assert spec.prompt_tokens == 5 + 2 * image_tokens(100, 50) and spec.input_units == 2
        elif spec.kind == "transcription":
            assert spec.input_units == pytest.approx(1.5) and spec.payload[0][:4] == b"RIFF"
        elif spec.kind == "rerank":
            assert len(spec.payload) == 4 and spec.prompt_tokens == 3 + 28
    assert seen == {"embeddings", "vision", "transcription", "rerank"}
