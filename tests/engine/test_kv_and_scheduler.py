"""Block accounting, prefix hashes and the scheduler's limits, one step at a time."""

from __future__ import annotations

from dataclasses import replace

import pytest

from surgelab.engine import (
    Engine,
    EngineRequest,
    RequestRejected,
    load_profile,
    prefix_block_hashes,
)
from surgelab.engine.kv import Allocation, KVCache


def tiny(**changes):
    return replace(load_profile("tiny"), **changes)


def test_block_hashes_are_chained_and_stable():
    a = prefix_block_hashes(list(range(40)), 16)
    b = prefix_block_hashes([*range(32), 99, 99], 16)
    assert len(a) == 2 and a == b  # the partial third block is not hashed
    c = prefix_block_hashes([1, *range(1, 40)], 16)
    assert c[0] != a[0] and c[1] != a[1]  # a change early changes every later hash
    assert a == prefix_block_hashes(list(range(40)), 16)
    with pytest.raises(ValueError):
        prefix_block_hashes([1], 0)


def test_prefix_blocks_are_shared_then_evicted_least_recently_used_first():
    kv = KVCache(num_blocks=6, block_size=4, prefix_caching=True)
    first = Allocation()
    assert kv.admit(first, (1, 2), tokens=9) == 0  # 3 blocks, nothing cached yet
    kv.promote(first, (1, 2))
    second = Allocation()
    assert kv.admit(second, (1, 2), tokens=9) == 2  # shares both, needs one private
    assert kv.free_blocks == 2 and kv.usage == pytest.approx(4 / 6)
    kv.release(first)
    kv.release(second)
    assert kv.usage == 0 and kv.free_blocks == 6 and kv.match((1, 2)) == 2  # resident, evictable
    third = Allocation()
    assert kv.admit(third, (), tokens=20) == 0  # needs 5 blocks: evicts hash 1 (older) only
    assert kv.match((2,)) == 1 and kv.match((1, 2)) == 0
    assert kv.admit(Allocation(), (), tokens=8) == -1  # does not fit; holds nothing
    assert kv.free_blocks == 1


def test_no_prefix_caching_means_no_hits():
    kv = KVCache(4, 4, prefix_caching=False)
    alloc = Allocation()
    kv.admit(alloc, (1,), 4)
    kv.promote(alloc, (1,))
    assert kv.match((1,)) == 0


def test_an_idle_engine_steps_in_zero_time():
    result = Engine(tiny()).step()
    assert result.idle and result.duration == 0


def test_chunked_prefill_respects_the_step_token_budget():
    engine = Engine(tiny(max_batched_tokens=100))
    engine.add(EngineRequest("a", 250, 2))
    steps = [engine.step() for _ in range(4)]
    assert [s.prefill_tokens for s in steps[:3]] == [100, 100, 50]
    assert [dict(s.emitted) for s in steps] == [{}, {}, {"a": 1}, {"a": 1}]
    assert steps[3].finished == ("a",) and steps[3].decode_seqs == 1


def test_max_num_seqs_caps_the_running_set():
    engine = Engine(tiny(max_num_seqs=3))
    for i in range(5):
        engine.add(EngineRequest(str(i), 10, 5))
    result = engine.step()
    assert (result.num_running, result.num_waiting) == (3, 2)
    assert set(result.emitted) == {"0", "1", "2"}


def test_requests_that_can_never_fit_are_rejected_up_front():
    engine = Engine(tiny(kv_capacity_tokens=1024, max_model_len=4096))
    with pytest.raises(RequestRejected, match="KV cache"):
        engine.add(EngineRequest("big", 1000, 100))
    with pytest.raises(RequestRejected, match="context length"):
        Engine(tiny(max_model_len=100)).add(EngineRequest("long", 90, 20))
    with pytest.raises(RequestRejected, match="output_tokens"):
        engine.add(EngineRequest("none", 10, 0))
    engine.add(EngineRequest("x", 10, 1))
    with pytest.raises(RequestRejected, match="duplicate"):
        engine.add(EngineRequest("x", 10, 1))


def test_abort_frees_the_request_wherever_it_is():
    engine = Engine(tiny(max_num_seqs=1))
    engine.add(EngineRequest("run", 10, 50))
    engine.add(EngineRequest("wait", 10, 50))
    engine.step()
    assert engine.abort("run") and engine.abort("wait") and not engine.abort("ghost")
    assert not engine.has_work and engine.kv.usage == 0


def test_a_prefix_evicted_to_the_cpu_tier_is_loaded_back_not_recomputed():
    """vLLM's KV offload: an evicted cached block lives on in host memory; a later hit loads it over the host link."""
    hashes = prefix_block_hashes(list(range(64)), 16)  # a 64-token shared prefix: 4 blocks
    with_tier = tiny(kv_capacity_tokens=128, block_size=16, kv_cpu_blocks=8, kv_load_s_per_block=1e-3)
    results = {}
    for name, profile in (("tier", with_tier), ("none", replace(with_tier, kv_cpu_blocks=0))):
        engine = Engine(profile)
        engine.add(EngineRequest("a", 64, 1, hashes))
        engine.step()  # prefilled, published, finished: its 4 blocks stay cached, evictable
        engine.add(EngineRequest("b", 120, 1, prefix_block_hashes(list(range(1000, 1120)), 16)))
        engine.step()  # 8 blocks: every cached one evicted (to host memory, with the tier)
        engine.add(EngineRequest("c", 80, 1, prefix_block_hashes(list(range(80)), 16)))
        step = engine.step()
        results[name] = step
    assert results["none"].cached_tokens == {}
    assert results["tier"].cached_tokens == {"c": 64}  # 4 blocks loaded back
    assert engine.kv.free_blocks == engine.kv.num_blocks
    prefill_only = with_tier.step_time(80 - 64, 0, 80, 1, 16 * 64 + 16 * 17 // 2)
    assert results["tier"].duration == pytest.approx(prefill_only + 4 * 1e-3)
    assert results["none"].duration == pytest.approx(with_tier.step_time(80, 0, 80))
