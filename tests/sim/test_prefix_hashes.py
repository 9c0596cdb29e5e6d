"""Prefix block hashes the fast way (``PrefixHasher``) have the equalities of their definition.

An engine compares block hashes only for equality (which blocks are resident, shared,
evicted), so the fast hashes must be equal exactly where ``reference_hashes`` — every
prompt tokenised, every block hashed — has equal ones, across requests, phases and block
positions. Checked twice: on the hashes of chosen requests (the unique prefix's first digits
recur every 4,096 and 4,096² requests, and a block that ends within them is shared), and on
whole simulations, whose every output must be equal value for value with either hashing.
"""

from __future__ import annotations

import itertools
import json

import pytest

from surgelab.load.phases import plan_phases
from surgelab.scenario.loader import build_scenario
from surgelab.sim import simulate
from surgelab.sim.prefix import PrefixHasher, reference_hashes

from .helpers import TARGET, fleet, outputs, scenario
from .test_fast_path import SMALL_BUDGET

DIGIT = 4096  # the unique prefix's base: requests i, i + 4096 share its first digit; i, i + 4096² its first two
INDICES = [0, 1, 5, 6, 5 + DIGIT, 5 + 2 * DIGIT, 5 + DIGIT**2, 5 + DIGIT**2 + DIGIT, 5 + 2 * DIGIT**2, 5 + (1 << 17)]


def _hashes(workload: dict, block_size: int, phases: int = 1) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
    """Reference and fast hashes of the requests ``INDICES`` of each phase, as the simulator takes them."""
    load = {"rate": 1, "duration": "1s"}
    scen = build_scenario(
        {"target": TARGET, "workload": workload, "phases": [{"name": f"p{k}", "load": load} for k in range(phases)]}
    )
    hasher = PrefixHasher(block_size)
    reference, fast = [], []
    for plan in plan_phases(scen):
        for i in INDICES:
            reference.append(reference_hashes(plan.sampler.spec(i), block_size))
            made = plan.sampler.synthetic(i)
            fast.append(hasher.hashes(plan.sampler.spec(i, text=made is None), made))
    return reference, fast


def _equal_where(reference: list[tuple[int, ...]], fast: list[tuple[int, ...]]) -> int:
    """Two blocks' fast hashes are equal exactly when their reference hashes are (any two blocks);
    a block's own id (< 0) aside, the hash is the reference's. Returns how many blocks got their own id."""
    assert [len(h) for h in fast] == [len(h) for h in reference]
    to_fast: dict[int, int] = {}
    to_reference: dict[int, int] = {}
    own = 0
    for r, f in zip(itertools.chain(*reference), itertools.chain(*fast)):
        assert to_fast.setdefault(r, f) == f, "blocks equal by definition got different hashes"
        assert to_reference.setdefault(f, r) == r, "blocks different by definition got one hash"
        assert f < 0 or f == r
        own += f < 0
    return own


def _shared_beyond_system(reference: list[tuple[int, ...]], system_blocks: int) -> int:
    """Blocks past the system prompt's whole blocks that some other request has too."""
    seen: dict[int, set[int]] = {}
    for n, hashes in enumerate(reference):
        for h in hashes[system_blocks:]:
            seen.setdefault(h, set()).add(n)
    return sum(1 for owners in seen.values() if len(owners) > 1)


def _profile(tmp_path, name: str, fields: dict) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(fields))
    return str(path)


def _dataset(tmp_path) -> dict:
    path = tmp_path / "prompts.jsonl"
    rows = [f"question {k}: " + " ".join(f"word{k * j % 97}" for j in range(20 + 7 * k)) for k in range(5)]
    path.write_text("".join(json.dumps({"prompt": p, "output_tokens": 12}) + "\n" for p in rows))
    return {"path": str(path), "order": "sequential"}


def _mooncake(tmp_path) -> dict:
    """A trace whose rows share leading hash_ids: a tree of prefixes, as Mooncake's conversations do."""
    path = tmp_path / "mooncake.jsonl"
    lines = []
    for n in range(400):
        ids = [n % 3, 10 + n % 7, 100 + n % 19, 1000 + n]
        tokens = 16 * (len(ids) - 1) + 1 + n % 16
        lines.append(json.dumps({"timestamp": 50 * n, "input_length": tokens, "output_length": 8, "hash_ids": ids}))
    path.write_text("\n".join(lines) + "\n")
    return {"type": "replay", "trace": str(path), "format": "mooncake", "block_size": 16}


@pytest.mark.parametrize("room", [0, 1, 2, 3, 4, 16])
@pytest.mark.parametrize("shared", [None, {"fraction": 0.5, "tokens": 1}, {"fraction": 0.5, "tokens": 14}])
def test_the_unique_prefix_digits_a_block_ends_within(room, shared):
    """A system prompt that leaves ``room`` tokens in its last block: that block ends within the unique prefix."""
    workload = {"system_prompt_tokens": 6 * 16 - room, "system_prompts": 2, "prompt_tokens": 40, "output_tokens": 1}
    if shared:
        workload["shared_prefix"] = shared
    reference, fast = _hashes(workload, 16)
    assert _equal_where(reference, fast) > 0
    if room in (1, 2) and not shared:  # the block after the system prompt's holds one or two digits
        assert _shared_beyond_system(reference, 5) >= 1


@pytest.mark.parametrize("block_size", [1, 2, 3, 4, 11, 32])
@pytest.mark.parametrize("system", [0, 7])
def test_any_block_size_and_phases_with_the_same_numbers(block_size, system):
    """Two phases number their requests alike: without a system prompt their unique prefixes are the same text."""
    workload = {
        "system_prompt_tokens": system,
        "prompt_tokens": {"dist": "uniform", "min": 1, "max": 40},
        "output_tokens": 1,
    }
    reference, fast = _hashes(workload, block_size, phases=2)
    assert _equal_where(reference, fast) > 0
    if system == 0 and block_size <= 3:  # a block of the first digits, shared across phases and within
        assert _shared_beyond_system(reference, 0) >= 1


@pytest.mark.parametrize(("workload", "shares"), [
    ({"prompt_tokens": 40, "output_tokens": 1, "unique_prefix": False, "system_prompt_tokens": 9}, True),  # one pool's slices recur
    ({"prompt_tokens": {"dist": "uniform", "min": 1, "max": 4}, "output_tokens": 1}, False),  # shorter than a unique prefix
    ({"output_tokens": 1, "unique_prefix": False, "dataset": "DATASET", "system_prompt_tokens": 9, "system_prompts": 2}, True),
])  # fmt: skip
def test_prompts_without_a_whole_unique_prefix(tmp_path, workload, shares):
    """Hashed from their text; each row of the dataset follows either system prompt."""
    if workload.get("dataset") == "DATASET":
        workload = {**workload, "dataset": _dataset(tmp_path)}
    reference, fast = _hashes(workload, 4)
    assert _equal_where(reference, fast) == 0
    assert (_shared_beyond_system(reference, 3) > 0) == shares


KV_PRESSURE = {**SMALL_BUDGET, "kv_capacity_tokens": 6_000}
SHORT = {
    "prompt_tokens": {"dist": "uniform", "min": 10, "max": 60},
    "output_tokens": {"dist": "uniform", "min": 1, "max": 8},
}
SIMULATIONS = {
    # 4,400 requests: request i + 4096 meets request i's block of the system prompt's end and the first digit
    "system prompts, the last block's room for one digit": (
        {"rate": 200, "duration": "22s"}, {**SHORT, "system_prompt_tokens": 95, "system_prompts": 2}, None, {},
    ),
    "a shared prefix on half the requests": (
        {"rate": 30, "duration": "30s"},
        {**SHORT, "system_prompt_tokens": 30, "shared_prefix": {"fraction": 0.5, "tokens": 45}}, None, {},
    ),
    "multi-turn sessions: each turn resends the history": (
        {"concurrency": 12, "think_time": "300ms", "duration": "30s"},
        {**SHORT, "system_prompt_tokens": 50, "session": {"turns": 4, "think_time": "500ms"}}, None, {},
    ),
    "a dataset read in order, with the response cache": (
        {"rate": 20, "duration": "20s"},
        {"output_tokens": 4, "unique_prefix": False, "dataset": "DATASET", "system_prompt_tokens": 20, "system_prompts": 2}, None,
        {"exact": True, "ttl": "2s"},
    ),
    "a Mooncake trace's hash_ids": ({"rate": "MOONCAKE", "duration": None}, {"output_tokens": 8}, None, {}),
    "KV cache pressure: evictions, preemption": (
        {"rate": 8, "duration": "30s"},
        {"prompt_tokens": {"dist": "uniform", "min": 100, "max": 800}, "output_tokens": {"dist": "uniform", "min": 1, "max": 200},
         "system_prompt_tokens": 600, "system_prompts": 3}, KV_PRESSURE, {},
    ),
    "the response cache too, sessions and single requests mixed": (
        {"rate": 15, "duration": "30s"},
        {"mix": [{"name": "chat", "weight": 1, **SHORT, "system_prompt_tokens": 40, "session": {"turns": 3, "think_time": "1s"}},
                     {"name": "one", "weight": 2, **SHORT, "system_prompt_tokens": 40}]},
        None, {"exact": True},
    ),
}  # fmt: skip


def _simulate(tmp_path, case: str, fast_prefix: bool):
    load, workload, profile, cache = SIMULATIONS[case]
    if load.get("rate") == "MOONCAKE":
        load = {**load, "rate": _mooncake(tmp_path)}
    if workload.get("dataset") == "DATASET":
        workload = {**workload, "dataset": _dataset(tmp_path)}
    pool = {"replicas": 2, "profile": _profile(tmp_path, "kv", profile) if profile else "llama3-8b-h100"}
    flt = fleet(pools=[pool], cache={"prefix": True, **cache})
    return simulate(scenario(load, workload=workload), flt, tmp_path / f"fast-{fast_prefix}", fast_prefix=fast_prefix)


@pytest.mark.parametrize("case", list(SIMULATIONS))
def test_simulations_equal_with_either_hashing(tmp_path, case):
    fast, reference = _simulate(tmp_path, case, True), _simulate(tmp_path, case, False)
    records, summary, report, timeline = outputs(fast.run_dir)
    want_records, want_summary, want_report, want_timeline = outputs(reference.run_dir)
    assert records.num_rows == want_records.num_rows > 100
    assert records.equals(want_records)  # every timestamp, gap, count and state
    assert summary == want_summary
    assert report == want_report
    assert timeline.equals(want_timeline)
