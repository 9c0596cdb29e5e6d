"""A response cache's memory, and the concurrency it would have bought, against hand sums."""

from __future__ import annotations

import math

import pyarrow.compute as pc
import pyarrow.parquet as pq

from surgelab.engine import load_profile
from surgelab.sim.cache import ResponseCache, memory_traded
from surgelab.sim.fleet import Cache

from .helpers import fleet, run, scenario

KV = 2 * 32 * 8 * 128 * 2  # llama3-8b: 2 (K and V) × layers × KV heads × head dim × 2 bytes = 131,072 per token


def test_the_tokens_held_count_live_answers_only():
    cache = ResponseCache(Cache(exact=True, ttl="10s"))
    s = 1_000_000_000
    cache.store(1, 0, 1000)
    cache.store(2, 1 * s, 500)
    cache.store(1, 2 * s, 1000)  # the same answer stored again replaces the first
    assert cache.tokens == 1500 and cache.peak_entries == 2
    cache.store(3, 11 * s, 200)  # key 2 expired at 11 s; key 1 lives until 12 s
    assert cache.tokens == 1200
    cache.store(4, 30 * s, 100)
    assert cache.tokens == 100 and cache.peak_tokens == 1500


def test_memory_and_traded_concurrency_by_hand():
    profile = load_profile("llama3-8b-h100")
    assert profile.kv_bytes_per_token == KV
    cache = ResponseCache(Cache(exact=True, memory_gb=10))
    cache.hits, cache.misses = 1, 19  # 5 %
    row = memory_traded("response", cache, profile, 999.5)
    # 10 GB ÷ 131,072 B = 76,293 tokens = 4,768 blocks of 16; a 1,000-token context takes 63 blocks
    assert row["memory_gb"] == 10 and row["memory_basis"] == "configured"
    assert row["bytes_per_sequence"] == 63 * 16 * KV
    assert row["sequences_traded"] == 4768 // 63 == 75
    replica = (profile.kv_capacity_tokens // 16) // 63
    assert row["replica_sequences"] == replica and 0.05 * replica <= 75
    assert row["hit_rate"] == 0.05 and row["wasteful"]
    assert "hit rate 5.0% < 20%" in row["warning"] and "75 more concurrent sequences" in row["warning"]

    cache.hits, cache.misses = 5, 15  # 25 %: above the threshold, no flag
    assert not memory_traded("response", cache, profile, 999.5)["wasteful"]
    cache.hits, cache.misses = 1, 19
    small = ResponseCache(Cache(exact=True, memory_gb=0.5))  # 3,814 tokens: 3 sequences, under 5 % of a replica
    small.hits, small.misses = 1, 19
    assert memory_traded("response", small, profile, 999.5)["sequences_traded"] == 3
    assert not memory_traded("response", small, profile, 999.5)["wasteful"]


def test_a_cache_of_unique_prompts_holds_every_answer_and_is_flagged(tmp_path):
    scen = scenario({"rate": 10, "duration": "20s"}, workload={"prompt_tokens": 500, "output_tokens": 100})
    result = run(tmp_path, scen, fleet(pools=[{"profile": "llama3-8b-h100"}], cache={"exact": True, "ttl": "10m"}))
    records = pq.read_table(result.run_dir / "records.parquet")
    ok = records.filter(pc.equal(records["state"], "ok"))
    tokens = pc.sum(pc.add(ok["prompt_tokens"], ok["output_tokens"])).as_py()
    (row,) = result.fleet["caches"]
    assert row["hit_rate"] == 0.0  # synthetic prompts never repeat
    assert row["peak_tokens"] == tokens and row["peak_entries"] == ok.num_rows  # nothing expired in 10 minutes
    assert row["memory_basis"] == "held as KV" and row["memory_gb"] == tokens * KV / 1e9
    assert row["mean_context_tokens"] == tokens / ok.num_rows
    context_blocks = -(-math.ceil(row["mean_context_tokens"]) // 16)
    assert row["sequences_traded"] == (tokens // 16) // context_blocks
    assert row["wasteful"] and result.summary["fleet"]["caches"] == [row]


def test_without_the_exact_cache_nothing_is_reported(tmp_path):
    result = run(tmp_path, scenario({"rate": 5, "duration": "4s"}), fleet(pools=[{"profile": "tiny"}]))
    assert "caches" not in result.fleet and "caches" not in result.summary["fleet"]
    assert "regions" not in result.fleet and "regions" not in result.fleet["config"]
