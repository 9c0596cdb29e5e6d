"""Profiles from physics (the DESIGN.md worked example) and from explicit coefficient files."""

from __future__ import annotations

import json

import pytest

from surgelab.engine import GPUS, MODELS, Deployment, EngineProfile, ProfileError, load_profile
from surgelab.engine.profiles import profile_names

KIB = 1024


def test_kv_bytes_per_token_match_the_model_table():
    assert MODELS["llama3-8b"].kv_bytes_per_token == 128 * KIB
    assert MODELS["llama2-7b"].kv_bytes_per_token == 512 * KIB
    assert MODELS["llama3-70b"].kv_bytes_per_token == 320 * KIB


def test_worked_example_llama3_8b_on_one_h100():
    """DESIGN.md: ≈ 6 ms per decode step (≈ 170 tokens/s per sequence), ≈ 430k KV tokens."""
    example = Deployment(
        MODELS["llama3-8b"],
        GPUS["h100"],
        bandwidth_efficiency=0.8,
        memory_utilization=0.9,
        activation_reserve_bytes=0,
    )
    assert example.model.weight_bytes == pytest.approx(16e9, rel=0.01)
    assert example.weight_read_s == pytest.approx(0.006, rel=0.02)
    assert 1 / example.weight_read_s == pytest.approx(170, rel=0.03)
    assert example.kv_capacity_tokens == pytest.approx(430_000, rel=0.01)

    shipped = load_profile("llama3-8b-h100")  # the same, with 1 GB of activation reserve
    assert shipped.decode_base_s == pytest.approx(example.weight_read_s)
    assert shipped.kv_capacity_tokens == pytest.approx(430_000, rel=0.05)
    small_batch = shipped.step_time(prefill_tokens=0, decode_seqs=1, kv_tokens_read=500)
    assert small_batch == pytest.approx(0.006 + shipped.step_overhead_s, rel=0.03)


def test_tensor_parallel_splits_weights_and_bandwidth_and_adds_comm():
    single = Deployment(MODELS["llama3-70b"], GPUS["h100"], num_gpus=1, mfu=0.2)  # the shipped MFU
    tp8 = load_profile("llama3-70b-8xh100")
    assert tp8.decode_base_s == pytest.approx(single.weight_read_s / 8)
    assert tp8.prefill_s_per_token == pytest.approx(single.compute_s_per_token / 8)
    assert tp8.step_overhead_s > single.step_overhead_s
    with pytest.raises(ValueError, match="does not fit"):
        _ = single.kv_capacity_tokens  # 141 GB of weights on one 80 GB GPU


def test_decode_is_never_faster_than_its_compute():
    p = load_profile("llama3-8b-h100")
    batch = 4096  # more tokens than the memory term can hide
    assert p.step_time(0, batch, 0) == pytest.approx(p.step_overhead_s + batch * p.prefill_s_per_token)


@pytest.mark.parametrize("name", profile_names())
def test_every_named_profile_is_valid_and_roundtrips_through_a_file(name, tmp_path):
    profile = load_profile(name)
    assert profile.validate() == []
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(profile.to_dict()))
    assert load_profile(path) == profile
    assert load_profile(str(path)) == profile


def test_yaml_coefficients_file(tmp_path):
    path = tmp_path / "fitted.yaml"
    path.write_text(
        "prefill_s_per_token: 3.0e-5\ndecode_base_s: 0.006\ns_per_kv_token: 5.0e-8\n"
        "step_overhead_s: 0.001\nkv_capacity_tokens: 4.0e5\nmax_num_seqs: 128\n"
        "max_batched_tokens: 4096\n"
    )
    profile = load_profile(path)
    assert profile.name == "fitted"
    assert profile.kv_capacity_tokens == 400_000
    assert profile.block_size == 16


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("[1, 2]", "must contain a mapping"),
        ("decode_base_s: [", "not valid yaml"),
        ("{}", "missing key 'prefill_s_per_token'"),
        ("speed: 3", "unknown key 'speed'"),
    ],
)
def test_bad_coefficient_files_say_what_is_wrong(tmp_path, text, error):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError, match=error):
        load_profile(path)


def test_bad_values_are_all_reported_at_once():
    data = load_profile("tiny").to_dict() | {"decode_base_s": -1, "max_num_seqs": 0}
    with pytest.raises(ProfileError) as info:
        EngineProfile.from_mapping(data)
    assert "decode_base_s" in str(info.value) and "max_num_seqs" in str(info.value)


def test_unknown_profile_name_lists_the_choices(tmp_path):
    with pytest.raises(ProfileError, match="unknown profile 'h9000'.*llama3-8b-h100"):
        load_profile("h9000")
    with pytest.raises(ProfileError, match="cannot read"):
        load_profile(tmp_path / "missing.yaml")
