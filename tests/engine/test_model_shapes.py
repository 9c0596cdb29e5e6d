"""Models read from Hugging Face config.json files, and the deployments the physics makes of them.

Counts are held to the figures their model cards publish; memory to what real vLLM servers
logged (Llama-2-7B on one H100: 119,408 tokens of KV cache, the one figure the reserve is set
from; the other three are checks); MoE and FP8 to their shapes.
"""

from __future__ import annotations

import json

import pytest

from surgelab.engine import GPUS, Architecture, ArchitectureError, Deployment, find_model, load_profile
from surgelab.engine.profile import ProfileError

KIB = 1024


@pytest.mark.parametrize(
    ("name", "billions"),
    [
        ("meta-llama/Meta-Llama-3-8B-Instruct", 8.03),
        ("meta-llama/Llama-2-7b-hf", 6.74),
        ("meta-llama/Llama-3.1-70B-Instruct", 70.55),
        ("Qwen/Qwen2.5-7B-Instruct", 7.62),
        ("mistralai/Mistral-Nemo-Instruct-2407", 12.25),
        ("mistralai/Mixtral-8x7B-v0.1", 46.70),  # "46.7B total"
        ("Qwen/Qwen3-30B-A3B", 30.53),  # "30.5B total"
        ("deepseek-ai/DeepSeek-V2-Lite", 15.71),  # "15.7B total", multi-head latent attention
    ],
)
def test_parameter_counts_match_the_model_cards(name, billions):
    assert find_model(name).total_params / 1e9 == pytest.approx(billions, abs=0.02)


def test_active_parameters_of_mixtures_of_experts():
    mixtral = find_model("mixtral-8x7b")
    assert mixtral.is_moe and mixtral.moe_layers == 32 and mixtral.experts_per_token == 2
    # "12.9B active" counts the input embedding table too (a lookup, not a multiply)
    assert (mixtral.active_params + mixtral.embedding_params) / 1e9 == pytest.approx(12.9, abs=0.05)
    scout = find_model("llama4-scout-fp8")
    assert scout.dtype == "fp8" and scout.moe_layers == 48 and scout.shared_intermediate == 8192
    assert (scout.active_params + scout.embedding_params) / 1e9 == pytest.approx(17.2, abs=0.1)  # "17B active"


def test_kv_bytes_per_token_by_attention_type():
    assert find_model("llama3-8b").kv_elements_per_token() * 2 == 128 * KIB  # GQA, 8 KV heads
    assert find_model("llama2-7b").kv_elements_per_token() * 2 == 512 * KIB  # MHA
    assert find_model("llama2-7b").attention_type == "MHA"
    lite = find_model("deepseek-v2-lite")
    assert lite.attention_type == "MLA" and lite.kv_elements_per_token() == 27 * (512 + 64)


def test_a_config_json_file_reads_like_the_catalogue(tmp_path):
    config = {"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
              "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064, "torch_dtype": "bfloat16",
              "max_position_embeddings": 32768, "tie_word_embeddings": False}  # fmt: skip
    folder = tmp_path / "qwen"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    mine = find_model(str(folder))
    assert mine.total_params == find_model("qwen2.5-7b").total_params
    assert mine.name == "qwen"


@pytest.mark.parametrize(
    ("text", "error"),
    [("[1]", "JSON object"), ("{", "not valid JSON"), ('{"hidden_size": 8}', "num_hidden_layers")],
)
def test_bad_config_json_says_what_is_wrong(tmp_path, text, error):
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(ArchitectureError, match=error):
        find_model(str(path))
    with pytest.raises(ArchitectureError, match="unknown model 'gpt-17'"):
        find_model("gpt-17")


def _vllm(model: str, tp: int) -> Deployment:
    return Deployment(find_model(model), GPUS["h100"], tp=tp, max_num_seqs=128, max_num_batched_tokens=2048, max_model_len=4096)


@pytest.mark.parametrize(
    ("model", "tp", "logged"),
    [
        ("llama2-7b", 1, 119_408),  # sets the reserve
        ("llama2-70b", 4, 501_712),
        ("codellama-34b", 2, 425_648),
        ("mixtral-8x7b", 2, 440_176),
    ],
)
def test_kv_cache_size_as_real_vllm_logged_it(model, tp, logged):
    """vLLM v0.15.1 'GPU KV cache size' on H100s at gpu_memory_utilization 0.9 (sim-to-real-accuracy-validation)."""
    assert _vllm(model, tp).kv_capacity_tokens == pytest.approx(logged, rel=0.02)


def test_tensor_parallelism_splits_weights_and_adds_all_reduces():
    tp4 = _vllm("llama3.1-70b", 4)
    four = tp4.profile()
    single = Deployment(find_model("llama3.1-70b"), GPUS["h200"])  # 141 GB of weights beside 139.8 GiB: no
    with pytest.raises(ValueError, match="needs at least 2 GPUs"):
        _ = single.kv_capacity_tokens
    eight = Deployment(find_model("llama3.1-70b"), GPUS["h100"], tp=8).profile()
    assert eight.decode_base_s == pytest.approx(four.decode_base_s / 2)
    assert eight.step_overhead_s > four.step_overhead_s > tp4.eff.step_s  # log2(8) > log2(4) all-reduce latency
    assert four.comm_s_per_token > 0 and _vllm("llama2-7b", 1).profile().comm_s_per_token == 0


def test_fp8_weights_halve_the_stream_and_use_fp8_peak():
    bf16 = _vllm("qwen3-14b", 1)
    fp8 = bf16.with_precision("fp8")
    assert fp8.streamed_dense_bytes < 0.56 * bf16.streamed_dense_bytes  # the head stays in 16 bits
    assert fp8.profile().prefill_s_per_token == pytest.approx(bf16.profile().prefill_s_per_token / 2, rel=1e-3)
    assert fp8.kv_capacity_tokens > bf16.kv_capacity_tokens
    fp8_kv = bf16.with_precision("bf16", "fp8")
    assert fp8_kv.kv_bytes_per_token == bf16.kv_bytes_per_token / 2
    a100 = Deployment(find_model("qwen3-14b"), GPUS["a100"], weights="fp8")  # no fp8 tensor cores: bf16 peak
    assert a100.profile().prefill_s_per_token == pytest.approx(
        Deployment(find_model("qwen3-14b"), GPUS["a100"]).profile().prefill_s_per_token
    )


def test_moe_step_streams_only_the_experts_its_tokens_touch():
    p = _vllm("mixtral-8x7b", 2).profile()
    assert p.num_experts == 8 and p.experts_per_token == 2
    assert p.experts_touched(1) == pytest.approx(2)
    assert p.experts_touched(4) == pytest.approx(8 * (1 - 0.75**4))
    assert p.experts_touched(2048) == pytest.approx(8)
    one, many = p.step_time(0, 1, 500), p.step_time(0, 64, 64 * 500)
    dense_part = p.decode_base_s + p.step_overhead_s
    assert one == pytest.approx(dense_part + 2 * p.expert_s + p.s_per_kv_token * 500 + p.comm_s_per_token, rel=1e-6)
    assert many > one + 5 * p.expert_s  # nearly all eight experts streamed


def test_a_deployment_file_is_a_profile(tmp_path):
    path = tmp_path / "qwen-tp1.yaml"
    path.write_text("model: Qwen/Qwen2.5-7B-Instruct\ngpu: h100\ntp: 1\nmax_num_seqs: 128\nmax_num_batched_tokens: 2048\nmax_model_len: 4096\n")
    profile = load_profile(path)
    assert profile.name == "qwen-tp1" and profile.max_num_seqs == 128 and profile.combine == "split"
    assert profile == _vllm("qwen2.5-7b", 1).profile("qwen-tp1")
    (tmp_path / "bad.yaml").write_text("model: qwen2.5-7b\ngpu: h900\ntp: 0\n")
    with pytest.raises(ProfileError, match="gpu: unknown GPU 'h900'"):
        load_profile(tmp_path / "bad.yaml")
    (tmp_path / "bad2.yaml").write_text("model: qwen2.5-7b\ngpu: h100\ntp: 0\nspeed: 2\n")
    with pytest.raises(ProfileError, match="unknown key 'speed'"):
        load_profile(tmp_path / "bad2.yaml")
    (tmp_path / "bad3.yaml").write_text("model: llama3.1-70b\ngpu: a10\n")
    with pytest.raises(ProfileError, match="does not fit on 1 × A10"):
        load_profile(tmp_path / "bad3.yaml")


def test_architecture_of_a_plain_mapping():
    arch = Architecture.from_config({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                                     "vocab_size": 100, "intermediate_size": 128})  # fmt: skip
    assert arch.kv_heads == 4 and arch.head_dim == 16 and not arch.is_moe
    assert arch.total_params == 2 * (4 * 64 * 64 + 3 * 64 * 128) + 2 * 100 * 64


def test_kv_offload_to_host_memory_is_a_second_tier_behind_the_gpu():
    d = Deployment(find_model("llama3-8b"), GPUS["h100"], cpu_offload_bytes=8 * 2**30)
    p = d.profile()
    block = 16 * 128 * KIB
    assert p.kv_cpu_blocks == 8 * 2**30 // block == 4096
    assert p.kv_load_s_per_block == pytest.approx(block / 64e9)  # PCIe Gen5 x16, one way
    assert Deployment(find_model("llama3-8b"), GPUS["h100"]).profile().kv_cpu_blocks == 0
