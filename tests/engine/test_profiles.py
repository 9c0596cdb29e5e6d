"""Profiles from physics (the DESIGN.md worked example) and from explicit coefficient files."""

from __future__ import annotations

import json

import pytest

from surgelab.engine import GPUS, Deployment, EngineProfile, ProfileError, find_model, load_profile
from surgelab.engine.calibration import H100_VLLM
from surgelab.engine.profiles import profile_names

KIB = 1024
GB = 1e9


def test_worked_example_llama3_8b_on_one_h100():
    """docs/engine.md: 15.0 GB streamed per decode step (the input table is only looked up) at the
    calibrated 79.6 % of 3.35 TB/s ≈ 5.6 ms, and (0.9 × 79.19 GiB − 0.45 GB − 16.06 GB) ÷ 128 KiB of KV."""
    d = Deployment(find_model("llama3-8b"), GPUS["h100"])
    assert d.weight_bytes == pytest.approx(16.06e9, rel=0.001)
    assert d.streamed_dense_bytes == pytest.approx(15.0e9, rel=0.001)
    assert d.kv_bytes_per_token == 128 * KIB
    shipped = load_profile("llama3-8b-h100")
    assert shipped.decode_base_s == pytest.approx(15.0e9 / (3.35e12 * H100_VLLM.hbm), rel=0.001)
    assert shipped.decode_base_s == pytest.approx(0.00563, rel=0.01)
    usable = 0.9 * 79.19 * 2**30 - H100_VLLM.reserve_bytes - 16.06e9
    assert shipped.kv_capacity_tokens == pytest.approx(usable / (128 * KIB), rel=0.001)
    small_batch = shipped.step_time(prefill_tokens=0, decode_seqs=1, kv_tokens_read=500)
    assert small_batch == pytest.approx(shipped.decode_base_s + shipped.step_overhead_s + 500 * shipped.s_per_kv_token)
    assert shipped.request_overhead_s == H100_VLLM.request_s  # the front end is no part of a step


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
