"""``surgelab memory``: sequences that fit in GPU memory, checked against sums done by hand."""

from __future__ import annotations

import math

import pytest
from typer.testing import CliRunner

from surgelab.cli import app
from surgelab.engine import find_model
from surgelab.engine.calibration import H100_VLLM
from surgelab.engine.hardware import GB, GIB, GPUS, Deployment
from surgelab.plan.memory import memory_fit, naive_concurrency, what_if

BODY, EMBEDDINGS = 8.03e9 - 2 * 128256 * 4096, 2 * 128256 * 4096  # Llama 3 8B: input table and head, untied


def _by_hand(weight_bytes: float, kv_bytes: float, context: int) -> tuple[int, int]:
    # Llama 3 8B: 32 layers, 8 KV heads of 128; one H100 (79.19 GiB as the driver reports it), 90 % usable, the
    # calibrated reserve; a quantised checkpoint keeps its embeddings and head in 16 bits.
    kv_per_token = 2 * 32 * 8 * 128 * kv_bytes
    weights = BODY * weight_bytes + EMBEDDINGS * max(weight_bytes, 2)
    usable = 79.19 * GIB * 0.9 - H100_VLLM.reserve_bytes - weights
    tokens = int(usable // kv_per_token)
    return tokens, (tokens // 16) // math.ceil(context / 16)


@pytest.mark.parametrize(
    ("weights", "kv", "w_bytes", "kv_bytes"),
    [("fp16", "fp16", 2, 2), ("fp8", "fp16", 1, 2), ("fp8", "fp8", 1, 1), ("int4", "fp8", 0.5, 1)],
)
def test_llama3_8b_on_one_h100_matches_the_sum_by_hand(weights, kv, w_bytes, kv_bytes) -> None:
    fit = memory_fit(Deployment(find_model("llama3-8b"), GPUS["h100"]), 8192, weights, kv)
    assert (fit.kv_tokens, fit.sequences) == pytest.approx(_by_hand(w_bytes, kv_bytes, 8192), abs=20)
    assert fit.weight_bytes == pytest.approx(BODY * w_bytes + EMBEDDINGS * max(w_bytes, 2), rel=1e-3)


def test_fp16_holds_55_sequences_of_8k_and_an_fp8_cache_more_than_doubles_it() -> None:
    fp16, _, fp8_kv, *_ = what_if(find_model("llama3-8b"), GPUS["h100"], 1, 8192)
    assert fp16.sequences == 55 and fp8_kv.sequences == 124
    assert fp8_kv.decode_tokens_per_s > 2 * fp16.decode_tokens_per_s


def test_weights_that_do_not_fit_hold_nothing() -> None:
    (fit,) = what_if(find_model("llama3-70b"), GPUS["h100"], 1, 4096, (("fp16", "fp16"),))
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
