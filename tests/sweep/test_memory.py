"""``surgelab memory``: sequences that fit in GPU memory, checked against sums done by hand."""

from __future__ import annotations

import math

import pytest
from typer.testing import CliRunner

from surgelab.cli import app
from surgelab.engine.hardware import GB, Deployment
from surgelab.engine.profiles import GPUS, MODELS
from surgelab.plan.memory import memory_fit, naive_concurrency, what_if


def _by_hand(params: float, weight_bytes: float, kv_bytes: float, context: int) -> tuple[int, int]:
    # Llama 3 8B: 32 layers, 8 KV heads of 128; one H100 (80 GB), 90 % usable, 1 GB reserve.
    kv_per_token = 2 * 32 * 8 * 128 * kv_bytes
    usable = 80e9 * 0.9 - 1e9 - params * weight_bytes
    tokens = int(usable // kv_per_token)
    return tokens, (tokens // 16) // math.ceil(context / 16)


@pytest.mark.parametrize(
    ("weights", "kv", "w_bytes", "kv_bytes"),
    [("fp16", "fp16", 2, 2), ("fp8", "fp16", 1, 2), ("fp8", "fp8", 1, 1), ("int4", "fp8", 0.5, 1)],
)
def test_llama3_8b_on_one_h100_matches_the_sum_by_hand(weights, kv, w_bytes, kv_bytes) -> None:
    fit = memory_fit(Deployment(MODELS["llama3-8b"], GPUS["h100"]), 8192, weights, kv)
    assert (fit.kv_tokens, fit.sequences) == _by_hand(8.03e9, w_bytes, kv_bytes, 8192)
    assert fit.weight_bytes == pytest.approx(8.03e9 * w_bytes)


def test_fp16_holds_51_sequences_of_8k_and_an_fp8_cache_more_than_doubles_it() -> None:
    fp16, _, fp8_kv, *_ = what_if(MODELS["llama3-8b"], GPUS["h100"], 1, 8192)
    assert fp16.sequences == 51 and fp8_kv.sequences == 117
    assert fp8_kv.decode_tokens_per_s > 2 * fp16.decode_tokens_per_s


def test_weights_that_do_not_fit_hold_nothing() -> None:
    (fit,) = what_if(MODELS["llama3-70b"], GPUS["h100"], 1, 4096, (("fp16", "fp16"),))
    assert (fit.kv_tokens, fit.sequences, fit.decode_step_s, fit.fits) == (0, 0, None, False)


def test_the_seeds_formula_is_printed_beside_the_proper_one() -> None:
    assert naive_concurrency(16 * GB, 0.2 * GB) == 80  # seed 002: InferenceService().max_concurrency()
    out = CliRunner().invoke(app, ["memory", "--gpu-memory", "16", "--mem-per-request", "0.2", "--context", "8192"])
    assert out.exit_code == 0, out.output
    assert "16 ÷ 0.2 = 80" in out.output
    assert (
        "fp16 weights, fp16 KV: the weights alone do not fit" in out.output
    )  # 16 GB of FP16 weights leave nothing on a 16 GB card


def test_a_wrong_precision_is_one_line() -> None:
    out = CliRunner().invoke(app, ["memory", "--weights", "fp5"])
    assert out.exit_code == 2 and "unknown precision 'fp5'" in out.output and "Traceback" not in out.output
