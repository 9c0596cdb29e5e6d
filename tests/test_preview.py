"""``surgelab preview`` sizes media without making it, and making audio and images at run time is about a
copy (issue 20: the preview of examples/mixed-production.yaml took 95 s of CPU synthesising every clip and
image, and each 12 s clip cost the client 53 ms)."""

from __future__ import annotations

import contextlib
import io
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from surgelab.load.phases import plan_phases
from surgelab.report.preview import compute_preview, render_terminal
from surgelab.scenario import load_scenario
from surgelab.workload.media import synth_image, synth_wav, wav_seconds

EXAMPLES = sorted((Path(__file__).parents[1] / "examples").glob("*.yaml"))
TRACES = Path(__file__).parents[1].parent / "shared" / "data" / "traces"
BOUND_S = 2.0


@contextlib.contextmanager
def cpu_bound(seconds: float) -> Iterator[None]:
    """Fail at once when the block has used ``seconds`` of CPU, rather than after the old 95 s."""

    def over(*_: object) -> None:
        raise TimeoutError(f"more than {seconds} s of CPU")

    previous = signal.signal(signal.SIGPROF, over)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_the_preview_of_every_example_takes_under_two_seconds(path: Path) -> None:
    if "replay" in path.read_text() and not TRACES.is_dir():
        pytest.skip(f"public traces not found at {TRACES}")
    scenario = load_scenario(path, {})
    started = time.process_time()
    with cpu_bound(BOUND_S):
        data = compute_preview(scenario, 2.0)
        render_terminal(data, Console(file=open("/dev/null", "w"), width=120))  # noqa: SIM115
    used = time.process_time() - started
    assert used < BOUND_S, f"{path.name}: {used:.2f} s of CPU"
    assert data.classes and all(len(c.prompt_tokens) for c in data.classes if c.share > 0)


def test_the_preview_sizes_what_the_run_will_send() -> None:
    """The sizes come from the very draws the run makes: prompt tokens (image tokens included), lengths, units."""
    scenario = load_scenario(Path(__file__).parents[1] / "examples" / "mixed-production.yaml", {})
    kinds = set()
    for plan in plan_phases(scenario):
        for i in range(40):
            sized, made = plan.sampler.spec(i, media=False), plan.sampler.spec(i)
            kinds.add(made.kind)
            assert (sized.kind, sized.request_class, sized.prompt_tokens, sized.max_tokens, sized.input_units) == (
                made.kind, made.request_class, made.prompt_tokens, made.max_tokens, made.input_units,
            ), i  # fmt: skip
            if made.kind == "transcription":
                assert made.input_units == wav_seconds(made.payload[0])
    assert kinds == {"chat", "vision", "transcription", "embeddings"}


def test_audio_clips_are_unique_exact_and_cost_a_copy() -> None:
    clips = [synth_wav(12.0, 16000, seed=i) for i in range(40)]
    assert len(set(clips)) == 40 and synth_wav(12.0, 16000, seed=7) == clips[7], "unique per seed, deterministic"
    assert wav_seconds(synth_wav(75.3, 16000, seed=1)) == pytest.approx(75.3), "longer than the pre-built signal"
    started = time.process_time()
    for i in range(50):
        synth_wav(12.0, 16000, seed=100 + i)
    per_clip_ms = (time.process_time() - started) / 50 * 1000
    assert per_clip_ms < 5, f"{per_clip_ms:.1f} ms of CPU per 12 s clip (synthesising one took 53 ms)"


@pytest.mark.parametrize("fmt", ["jpeg", "png"])
def test_images_are_unique_exact_in_size_and_cheap(fmt: str) -> None:
    from PIL import Image

    synth_image(64, 64, fmt, 85, seed=0)  # what is built once (the JPEG gradient) is built here
    decoded = []
    for seed, (width, height) in enumerate([(1120, 840), (1601, 1199), (17, 9), (640, 480)]):
        with Image.open(io.BytesIO(synth_image(width, height, fmt, 85, seed=seed))) as image:
            image.load()
            assert image.size == (width, height) and image.format == fmt.upper()
            decoded.append(image.tobytes())
    pixels = set()
    for seed in range(12):
        with Image.open(io.BytesIO(synth_image(320, 200, fmt, 85, seed=seed))) as image:
            pixels.add(image.tobytes())
    assert len(pixels) == 12, "every request's image differs in its pixels, not only in its bytes"
    if fmt == "png":
        return  # written directly: faster than Pillow's encoder, but still in proportion to its size
    started = time.process_time()
    for seed in range(20):
        synth_image(1600, 1200, fmt, 85, seed=seed)
    per_image_ms = (time.process_time() - started) / 20 * 1000
    assert per_image_ms < 5, f"{per_image_ms:.1f} ms of CPU per 1600×1200 JPEG (encoding one took 15 ms)"
