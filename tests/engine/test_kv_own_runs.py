"""A request's own blocks kept as runs answer exactly as the same blocks kept one at a time.

Each case drives two caches, one with ``own_runs`` and one without, through the same random
life of requests (admit, grow, promote, preempt, finish, the admission check) on prompts that
share hashed blocks and end in their own ids, as the simulator's are, under KV pressure so
that runs are evicted part by part, revived, published again around what is left of them,
and checks every answer and the free and used blocks after every step.
"""

from __future__ import annotations

import random

import pytest

from surgelab.engine.kv import Allocation, KVCache


def _prompts(rng: random.Random, count: int) -> list[tuple[int, ...]]:
    """Prompts of 0–3 shared system blocks, 0–2 hashed blocks of their own and 0–9 own ids."""
    systems = [tuple(range(100 * s, 100 * s + rng.randint(0, 3))) for s in range(3)]
    prompts = []
    for i in range(count):
        hashed = tuple(10_000 + 10 * i + k for k in range(rng.randint(0, 2)))
        base = -1 - (i << 8)
        own = tuple(range(base, base - rng.randint(0, 9), -1))
        prompts.append(rng.choice(systems) + hashed + own)
    return prompts


def _life(seed: int, cache: KVCache) -> list:
    """Every answer ``cache`` gives to one random sequence of engine calls, with its counts after each."""
    rng = random.Random(seed)
    prompts = _prompts(rng, 12)
    size = cache.block_size
    waiting = list(range(len(prompts)))
    running: dict[int, tuple[Allocation, int]] = {}  # request → (its allocation, tokens it covers)
    answers: list = []
    for _ in range(400):
        op = rng.random()
        if waiting and op < 0.4:
            r = rng.choice(waiting)
            hashes = prompts[r]
            tokens = rng.randint(1, (len(hashes) + 2) * size)  # a prompt's first chunk, or all of it and more
            answers.append(("admissible", cache.admissible(hashes, tokens)))
            alloc = Allocation()
            hits = cache.admit(alloc, hashes, tokens)
            answers.append(("admit", hits))
            if hits >= 0:
                waiting.remove(r)
                running[r] = (alloc, tokens)
                if rng.random() < 0.8:  # its prefill done
                    cache.promote(alloc, hashes)
        elif running and op < 0.6:
            r = rng.choice(sorted(running))
            alloc, tokens = running[r]
            tokens += rng.randint(1, 2 * size)
            grown = cache.grow(alloc, tokens)
            answers.append(("grow", grown))
            if grown:
                running[r] = (alloc, tokens)
        elif running and op < 0.75:
            r = rng.choice(sorted(running))
            cache.promote(running[r][0], prompts[r])
        elif running:
            r = rng.choice(sorted(running))
            cache.release(running.pop(r)[0])
            if op < 0.9:  # preempted: it comes back
                waiting.append(r)
        if waiting:
            answers.append(("match", cache.match(prompts[rng.choice(waiting)])))
        answers.append((cache.free_blocks, round(cache.usage, 12), *(a.blocks for a, _ in running.values())))
    return answers


@pytest.mark.parametrize("seed", range(60))
def test_own_blocks_in_runs_answer_as_blocks_one_at_a_time(seed):
    blocks = random.Random(seed).choice([12, 20, 40])
    runs, single = KVCache(blocks, 4, own_runs=True), KVCache(blocks, 4, own_runs=False)
    assert _life(seed, runs) == _life(seed, single)


def test_a_run_is_evicted_from_its_first_block_and_then_matches_no_more():
    kv = KVCache(8, 4)
    own = (-1, -2, -3, -4)
    alloc = Allocation()
    assert kv.admit(alloc, own, 17) == 0  # 5 blocks: 4 own and one for the rest
    kv.promote(alloc, own)
    assert kv.match(own) == 4 and alloc.blocks == 5 and kv.free_blocks == 3
    kv.release(alloc)
    assert kv.free_blocks == 8 and kv.match(own) == 4  # resident, evictable
    assert kv.admit(Allocation(), (), 20) == 0  # 5 blocks: the 4 unused ones, then the run's first
    assert kv.match(own) == 0 and kv.free_blocks == 3
