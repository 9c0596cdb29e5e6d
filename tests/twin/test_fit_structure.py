"""The fit's choice of step-time structure and its coefficients, against engines whose truth is known.

End to end (simulated records of an additive engine with attention and per-sequence costs), and at
unit level (observations priced by ``EngineProfile.price`` itself, with noise): the structure chosen
is the true one, every coefficient comes back within the stated tolerance, and nothing is written
silently — a coefficient the records cannot identify keeps the base profile's value with a warning
that names it, and a negative estimate is held at 0 with a warning that names it and its value.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from surgelab.engine.profile import EngineProfile
from surgelab.scenario.loader import build_scenario
from surgelab.twin.fit import fit_observations, fit_profile
from surgelab.twin.observations import Observations

# A CPU-like engine: the step's parts add, prefill grows with the square of the prompt, each
# sequence in a step costs half a millisecond of scheduling.
CPU = {
    "prefill_s_per_token": 5e-5, "prefill_s_per_pair": 2e-8, "decode_base_s": 0.006, "s_per_kv_token": 1e-6,
    "step_overhead_s": 0.002, "step_s_per_seq": 5e-4, "combine": "sum",
    "kv_capacity_tokens": 200_000, "max_num_seqs": 6, "max_batched_tokens": 4096,
}  # fmt: skip
# A GPU-like engine: max(memory, compute), with an attention term.
GPU = EngineProfile("gpu", prefill_s_per_token=2e-5, decode_base_s=0.008, s_per_kv_token=2e-7, step_overhead_s=0.001,
                    kv_capacity_tokens=400_000, max_num_seqs=16, max_batched_tokens=8192, prefill_s_per_pair=5e-9)  # fmt: skip
SOLVED = ("prefill_s_per_token", "prefill_s_per_pair", "decode_base_s", "s_per_kv_token", "step_s_per_seq")


def _scenario(load: dict, workload: dict):
    return build_scenario({"target": {"url": "http://127.0.0.1:1/v1", "model": "m"}, "load": load, "workload": workload})


def test_fit_recovers_an_additive_engine_with_attention_from_simulated_records(tmp_path: Path) -> None:
    from surgelab.sim.loader import build_fleet
    from surgelab.sim.run import simulate

    (tmp_path / "truth.yaml").write_text(yaml.safe_dump(CPU))
    fleet = build_fleet({"pools": [{"replicas": 1, "profile": str(tmp_path / "truth.yaml"), "coalesce": 0}]})
    simulate(_scenario({"rate": 3, "duration": "8s", "arrival": "constant"},
                       {"prompt_tokens": {"dist": "uniform", "min": 100, "max": 3000}, "output_tokens": 8}),
             fleet, tmp_path / "runs" / "l1")  # fmt: skip
    simulate(_scenario({"concurrency": {"type": "step", "start": 1, "step": 3, "hold": "2s", "max": 10}},
                       {"prompt_tokens": {"dist": "uniform", "min": 200, "max": 3000}, "output_tokens": 40}),
             fleet, tmp_path / "runs" / "l2")  # fmt: skip
    base = replace(EngineProfile.from_mapping(CPU), combine="max", prefill_s_per_pair=0.0, step_s_per_seq=0.0)
    result = fit_profile(tmp_path / "runs", base=base)
    assert result.structure == "sum+attention+per-seq", result.reason
    assert result.profile.combine == "sum"
    c = result.coefficients
    for name in SOLVED:  # within 1 %
        assert c[name].source == "fitted" and c[name].value == pytest.approx(CPU[name], rel=0.01), (name, c[name])
        assert 0 < c[name].stderr < 0.01 * c[name].value
    # in an additive step the overhead adds exactly as decode_base does: only their sum is seen
    assert c["step_overhead_s"].source == "kept from base profile" and c["step_overhead_s"].value == CPU["step_overhead_s"]
    assert any("step_overhead_s: not identifiable" in n and "kept 0.002 from the base profile" in n for n in result.notes)
    scores = {cand.structure: cand.held_out["score"] for cand in result.candidates}
    assert len(scores) == 8 and scores["sum+attention+per-seq"] < 0.2 * scores["max+attention+per-seq"]


def _observations(profile: EngineProfile, seed: int = 0, noise: float = 0.005, lengths=(50, 3000), mixed: bool = True) -> Observations:
    """What a client would see of ``profile``: decode gaps, idle prefills and mixed steps, each priced by the profile."""
    rng = np.random.default_rng(seed)
    b = rng.integers(1, 12, 600).astype(float)
    kv = b * rng.uniform(100, 3000, b.size)
    gaps = np.array([profile.price(n, r, n, 0) for n, r in zip(b, kv)])
    prompt = rng.integers(*lengths, 60) if lengths[1] > lengths[0] else np.full(60, lengths[0])
    ttft = np.array([profile.request_overhead_s + profile.step_time(int(p), 0, int(p)) for p in prompt])
    mb = rng.integers(1, 10, 120 if mixed else 0).astype(float)
    mkv = mb * rng.uniform(100, 3000, mb.size)
    mp = rng.integers(50, 3000, mb.size).astype(float)
    mix = np.array([profile.price(n + p, r + p, n + 1, p * (p + 1) / 2) for n, r, p in zip(mb, mkv, mp)])

    def noisy(y):
        return y * (1 + noise * rng.standard_normal(y.size))

    return Observations(noisy(gaps), kv, b, noisy(ttft), prompt.astype(float), 11, 1000, noisy(mix), mkv, mb, mp)


def test_fit_recovers_a_roofline_engine_with_attention_and_chooses_max() -> None:
    result = fit_observations(_observations(GPU), base=replace(GPU, prefill_s_per_pair=0.0))
    assert result.structure == "max+attention", result.reason
    c = result.coefficients
    for name in ("prefill_s_per_token", "prefill_s_per_pair", "decode_base_s", "s_per_kv_token", "step_overhead_s"):
        # 0.5 % noise: within 3 %, or 3 standard errors for the small intercept (1 ms under 100 ms prefills)
        assert abs(c[name].value - getattr(GPU, name)) <= max(0.03 * getattr(GPU, name), 3 * c[name].stderr), (name, c[name])
    assert c["step_s_per_seq"].source == "not in structure"
    chosen = next(cand for cand in result.candidates if cand.chosen)
    worst_sum = min(cand.held_out["score"] for cand in result.candidates if cand.structure.startswith("sum"))
    assert chosen.held_out["score"] < 0.5 * worst_sum


def test_constant_prompt_lengths_keep_the_base_overhead_with_a_warning_never_a_silent_zero() -> None:
    truth = replace(GPU, prefill_s_per_pair=0.0)
    obs = _observations(truth, lengths=(800, 800), mixed=False)  # the old records: decode gaps, idle prefills of one length
    base = replace(truth, step_overhead_s=0.0015, prefill_s_per_token=3e-5)
    result = fit_observations(obs, base=base)
    c = result.coefficients
    held = [name for name, coef in c.items() if coef.source == "kept from base profile"]
    assert held, result.coefficients
    for name in held:  # each one named in a warning, with the value kept
        assert c[name].value == getattr(base, name) != 0
        assert any(n.startswith(f"WARNING {name}: not identifiable") and f"kept {getattr(base, name):.4g}" in n
                   for n in result.notes), result.notes  # fmt: skip
    assert "step_overhead_s" in held
    assert result.profile.prefill_s_per_token > 0 and result.profile.step_overhead_s == 0.0015
    # the time to first token the records do show is still right: front end + overhead + slope × 800 tokens
    fitted = result.profile
    assert fitted.request_overhead_s + fitted.step_time(800, 0, 800) == pytest.approx(truth.step_time(800, 0, 800), rel=0.02)
    # without a base profile the value written is the default, and the warning says so
    bare = fit_observations(obs)
    assert any(n.startswith("WARNING step_overhead_s: not identifiable") and "no base profile" in n for n in bare.notes)


def test_a_negative_estimate_is_held_at_zero_with_a_warning_naming_it_and_its_value() -> None:
    obs = _observations(replace(GPU, prefill_s_per_pair=0.0), noise=0.002)
    obs.gap_s = 0.012 - 4e-8 * obs.gap_kv  # decode steps that get *faster* with more KV to read
    result = fit_observations(obs)
    c = result.coefficients["s_per_kv_token"]
    assert c.source == "clamped to 0" and c.value == 0.0 and result.profile.s_per_kv_token == 0.0
    warning = next(n for n in result.notes if n.startswith("WARNING s_per_kv_token"))
    estimate = float(warning.split("negative, ")[1].split(" ")[0])
    assert estimate < 0 and estimate == pytest.approx(-4e-8, rel=0.5), warning


def test_gaps_of_zero_cannot_drive_the_roofline_fit_to_an_all_compute_engine() -> None:
    """Wall-clock records on a busy machine: 2 % of the decode gaps are 0 (two tokens in one read) and the rest jitter.

    Weighted by 1/y those rows weigh 1e9 times the others: the memory part is fitted to 0, every row is assigned
    the compute part (which then fits with the lowest loss) and decode_base_s, s_per_kv_token come out
    "not identifiable" and 0. Measured against the prediction they are -100 % errors, and the robust fit drops them.
    """
    truth = replace(GPU, prefill_s_per_pair=0.0)
    obs = _observations(truth, noise=0.05)
    obs.gap_s[np.random.default_rng(1).choice(obs.gap_s.size, 12, replace=False)] = 0.0
    result = fit_observations(obs)
    c = result.coefficients
    assert c["s_per_kv_token"].source == "fitted" and c["s_per_kv_token"].value == pytest.approx(truth.s_per_kv_token, rel=0.1)
    assert c["prefill_s_per_token"].value == pytest.approx(truth.prefill_s_per_token, rel=0.1)
    step_base = truth.decode_base_s + truth.step_overhead_s
    assert c["decode_step_base_s"].value == pytest.approx(step_base, rel=0.05), c
    assert not any("not identifiable" in n for n in result.notes), result.notes
    assert result.samples["trimmed"] >= 12 and result.residual["decode"] < 0.05


# A vLLM-like engine behind an API server: 4.6 ms of front end per request (HTTP, tokenising) before
# the request can join a step, chunked prefill over a 1,024-token budget, steps priced by max().
FRONT_END = {
    "prefill_s_per_token": 5.6e-5, "decode_base_s": 0.0054, "s_per_kv_token": 1.27e-6, "step_overhead_s": 0.003,
    "request_overhead_s": 0.0046, "kv_capacity_tokens": 100_000, "max_num_seqs": 8, "max_batched_tokens": 1024,
}  # fmt: skip


def test_fit_recovers_a_front_end_time_per_request_apart_from_the_step_overhead(tmp_path: Path) -> None:
    from surgelab.sim.loader import build_fleet
    from surgelab.sim.run import simulate

    (tmp_path / "truth.yaml").write_text(yaml.safe_dump(FRONT_END))
    fleet = build_fleet({"pools": [{"replicas": 1, "profile": str(tmp_path / "truth.yaml"), "coalesce": 0}]})
    simulate(_scenario({"rate": 2, "duration": "15s", "arrival": "constant"},
                       {"prompt_tokens": {"dist": "uniform", "min": 32, "max": 1500}, "output_tokens": 4}),
             fleet, tmp_path / "runs" / "idle")  # fmt: skip
    simulate(_scenario({"concurrency": {"type": "step", "start": 1, "step": 4, "hold": "2s", "max": 13}},
                       {"prompt_tokens": {"dist": "uniform", "min": 32, "max": 1200}, "output_tokens": 48}),
             fleet, tmp_path / "runs" / "climb")  # fmt: skip
    base = replace(EngineProfile.from_mapping(FRONT_END), request_overhead_s=0.0)
    result = fit_profile(tmp_path / "runs", base=base)
    assert result.profile.combine == "max", result.reason
    c = result.coefficients
    for name in ("request_overhead_s", "step_overhead_s", "decode_base_s", "s_per_kv_token", "prefill_s_per_token"):
        assert c[name].source == "fitted", (name, c[name])  # not kept from the base's 0, not clamped
        assert c[name].value == pytest.approx(FRONT_END[name], rel=0.05), (name, c[name])
        assert 0 < c[name].stderr < 0.05 * c[name].value, (name, c[name])
    assert result.profile.request_overhead_s == c["request_overhead_s"].value


def test_a_front_end_the_records_cannot_tell_from_the_prefill_is_held_never_solved() -> None:
    from surgelab.twin.fit import rows_of
    from surgelab.twin.structure import Structure, solve

    # one prompt length and no mixed steps, under max: the idle prefills' intercept is front end + step
    # overhead + slope × 800, and nothing tells the three apart
    truth = replace(GPU, prefill_s_per_pair=0.0, request_overhead_s=0.003)
    obs = _observations(truth, lengths=(800, 800), mixed=False)
    held = {"request_overhead_s": 0.002, "step_overhead_s": 0.0015, "decode_base_s": 0.0, "s_per_kv_token": 0.0,
            "prefill_s_per_token": 0.0, "prefill_s_per_pair": 0.0, "step_s_per_seq": 0.0}  # fmt: skip
    sol = solve(rows_of(obs, truth.max_batched_tokens), Structure("max"), held)
    assert "request_overhead_s" not in sol.solved
    assert sol.held["request_overhead_s"].startswith("confounded with")
    assert sol.values["request_overhead_s"] == 0.002  # the value given for it, not 0
    # through the fit, a held coefficient is written with its source and a warning (test above)
    base = replace(truth, request_overhead_s=0.002)
    result = fit_observations(obs, base=base)
    c = result.coefficients["request_overhead_s"]
    warned = any(n.startswith("WARNING request_overhead_s: not identifiable") for n in result.notes)
    assert (c.source == "kept from base profile" and c.value == 0.002 and warned) or (c.source == "fitted" and not warned)


def test_a_fitted_profile_keeps_the_base_limits_but_not_its_physics() -> None:
    """A base from physics (its GPU, a TP payload term): the fit measured what those terms priced, so they go,
    and without a GPU the fitted profile carries no physics error bar (its error is its fit's)."""
    base = replace(GPU, prefill_s_per_pair=0.0, comm_s_per_token=1.5e-5, gpu="H100 SXM")
    result = fit_observations(_observations(replace(GPU, prefill_s_per_pair=0.0)), base=base)
    assert result.profile.gpu == "" and result.profile.comm_s_per_token == 0.0
    assert result.profile.kv_capacity_tokens == base.kv_capacity_tokens
