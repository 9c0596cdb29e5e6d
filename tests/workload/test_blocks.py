"""Mooncake block prompts: exact token counts, shared prefixes reproduced, deterministic per seed."""

from __future__ import annotations

from pathlib import Path

import pytest

from surgelab.engine import prefix_block_hashes
from surgelab.tokenizer import BuiltinTokenizer
from surgelab.traces import read_trace
from surgelab.workload.blocks import BlockPromptBuilder

TOK = BuiltinTokenizer()
MOONCAKE = (
    Path(__file__).resolve().parents[2].parent / "shared" / "data" / "traces" / "mooncake_conversation_trace.jsonl"
)


def tokens(text: str) -> list[str]:
    return text.split(" ") if text else []


@pytest.mark.parametrize(
    ("ids", "length"),
    [
        ((), 0),
        ((), 5),
        ((1,), 0),
        ((1,), 1),
        ((1,), 15),
        ((1,), 16),
        ((1, 2), 17),
        ((1, 2, 3), 40),
        ((1, 2), 48),
        ((7,), 100),
    ],
)
def test_exact_token_counts(ids, length):
    text = BlockPromptBuilder(seed=3, block_size=16).text(ids, length)
    assert TOK.count(text) == length == len(tokens(text))


def test_exact_counts_with_512_token_blocks():
    builder = BlockPromptBuilder(seed=0)
    assert TOK.count(builder.block(12)) == 512
    for length in (1, 511, 512, 513, 1023, 1024, 1500, 2000):
        assert TOK.count(builder.text([0, 1, 2], length)) == length


def test_shared_ids_share_exactly_their_blocks_of_text():
    builder = BlockPromptBuilder(seed=11, block_size=16)
    a = tokens(builder.text([0, 1, 2, 3], 60))
    b = tokens(builder.text([0, 1, 9, 3], 64))
    c = tokens(builder.text([5, 1, 2, 3], 64))
    assert a[:32] == b[:32] and a[32:48] != b[32:48]
    assert a[:16] != c[:16] and a[16:32] == c[16:32]  # same id at the same position: same block text
    assert " ".join(a).startswith(builder.block(0) + " " + builder.block(1) + " ")


def test_truncated_last_block_is_a_prefix_of_the_block():
    builder = BlockPromptBuilder(seed=1, block_size=16)
    assert tokens(builder.text([4, 5], 20)) == tokens(builder.block(4)) + tokens(builder.block(5))[:4]
    assert tokens(builder.text([4, 5, 6], 8)) == tokens(builder.block(4))[:8]


def test_padding_past_the_blocks_depends_on_salt():
    builder = BlockPromptBuilder(seed=1, block_size=16)
    plain = tokens(builder.text([4], 40))
    assert plain[:16] == tokens(builder.block(4)) and len(plain) == 40
    assert tokens(builder.text([4], 40)) == plain  # deterministic without a salt
    salted = [tokens(builder.text([4], 40, salt=s)) for s in (1, 2)]
    assert salted[0][:16] == salted[1][:16] == plain[:16]
    assert salted[0][16:] != salted[1][16:]
    assert TOK.count(builder.text([], 33, salt=9)) == 33


def test_deterministic_per_seed_and_cache_bounded():
    a = BlockPromptBuilder(seed=5, block_size=32, cache_blocks=2)
    b = BlockPromptBuilder(seed=5, block_size=32)
    first = a.text([1, 2, 3, 4], 128)
    for block_id in range(10):
        a.block(block_id)
    assert len(a._cache) <= 2
    assert a.text([1, 2, 3, 4], 128) == first == b.text([1, 2, 3, 4], 128)
    assert BlockPromptBuilder(seed=6, block_size=32).text([1, 2, 3, 4], 128) != first
    assert TOK.count(a.block(-3)) == 32 and a.block(-3) != a.block(3)  # signed hash ids work


def test_bad_arguments():
    with pytest.raises(ValueError):
        BlockPromptBuilder(seed=-1)
    with pytest.raises(ValueError):
        BlockPromptBuilder(seed=0, block_size=0)
    with pytest.raises(ValueError):
        BlockPromptBuilder(seed=0).text([1], -1)


def test_real_mooncake_prefixes_reach_the_engine_block_hashes():
    if not MOONCAKE.is_file():
        pytest.skip(f"real trace {MOONCAKE.name} not found in {MOONCAKE.parent} (the shared data folder is absent)")
    trace = read_trace(MOONCAKE)
    builder = BlockPromptBuilder(seed=0, block_size=trace.block_size)
    rows = range(40)
    texts = [builder.text(trace.prefix_blocks[i], int(trace.prompt_tokens[i])) for i in rows]
    for i, text in zip(rows, texts):
        assert TOK.count(text) == trace.prompt_tokens[i]
    engine_block = 16  # a vLLM-style KV block: 32 of them per Mooncake block
    hashes = [prefix_block_hashes(tokens(t), engine_block) for t in texts]
    for i in rows:
        for j in rows:
            ids_i, ids_j = trace.prefix_blocks[i], trace.prefix_blocks[j]
            shared = next((k for k, (x, y) in enumerate(zip(ids_i, ids_j)) if x != y), min(len(ids_i), len(ids_j)))
            full = min(shared * 512, int(trace.prompt_tokens[i]), int(trace.prompt_tokens[j])) // engine_block
            assert hashes[i][:full] == hashes[j][:full]
            if shared < min(len(ids_i), len(ids_j)):  # the first differing block differs in the engine too
                k = shared * 512 // engine_block
                if k < min(len(hashes[i]), len(hashes[j])):
                    assert hashes[i][k] != hashes[j][k]
