"""Request specs by index: deterministic for a seed, whichever worker or order asks.

Lengths and class choices are sampled in blocks keyed by (seed, block number), so
``spec(i)`` is the same in a single process and in any split across workers. Prompt text
is a slice of one long pre-generated word pool (each pool word is exactly one token and
five characters with its space), which makes building a prompt a string slice rather than
thousands of joins.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from surgelab.scenario.model import RequestClass, Workload
from surgelab.tokenizer import VOCABULARY, BuiltinTokenizer, Tokenizer
from surgelab.workload.kinds import build as build_kind
from surgelab.workload.kinds import has_payload
from surgelab.workload.kinds import prepare as prepare_kind
from surgelab.workload.request import RequestSpec

__all__ = ["PromptFactory", "WorkloadSampler", "Conversation", "Synthetic", "PREFIX_WIDTH"]

_BLOCK = 4096
_POOL_WORDS = 1 << 17
PREFIX_WIDTH = 3
"""Words of a prompt's unique prefix (its request number in base 4096, least significant digit first)."""
_LEAN_SPECS = 4096  # lean specs kept for reuse per class (bounded)
MAX_TURNS = 255  # turn ids live in 8 bits of the request id (load/phases.py)


class _Blocks:
    """Per-index random draws, generated a block at a time and cached (bounded)."""

    def __init__(self, seed: Sequence[int], draw) -> None:
        self._seed, self._draw = list(seed), draw
        self._cache: dict[int, list[tuple]] = {}

    def __getitem__(self, index: int) -> tuple:
        block, offset = divmod(index, _BLOCK)
        cached = self._cache.get(block)
        if cached is None:
            if len(self._cache) > 64:
                self._cache.clear()
            columns = self._draw(np.random.default_rng([*self._seed, block]))
            # one tuple of Python values per index: reading a draw is then one list lookup
            cached = self._cache[block] = list(zip(*(column.tolist() for column in columns)))
        return cached[offset]


@dataclass(frozen=True)
class Conversation:
    """The plan of one multi-turn session, drawn when it starts."""

    turns: int
    think_s: tuple[float, ...]  # pause before each turn after the first
    prompt_tokens: tuple[int, ...]  # new user tokens of each turn after the first
    output_tokens: tuple[int, ...]
    previous_response_id: bool = False  # a later turn names the previous answer instead of resending the history


class Synthetic(NamedTuple):
    """How a synthetic prompt is made, for what needs its tokens but not its text (prefix hashing).

    The prompt (``spec(index).prompt``) is ``lead`` and a space (``spaced``, even when ``lead``
    is empty), or nothing, then ``source.text(index, tokens)``: the request's unique prefix,
    then the pool's words, each word one token. (A named tuple: one is made per request, and a
    frozen dataclass costs more to make; its words are found only when asked for.)
    """

    source: PromptFactory
    index: int  # type: ignore[assignment]  # a field may shadow tuple.index (sim.prefix reads made.index)
    lead: str
    spaced: bool
    tokens: int

    def words(self, count: int) -> list[str]:
        """The first ``count`` words of its own text (``lead`` not counted)."""
        return self.source.words(self.index, self.tokens, count)


class PromptFactory:
    """Specs for one request class."""

    def __init__(
        self, request_class: RequestClass, seed: int | Sequence[int], tokenizer: Tokenizer | None = None, salt: int = 0
    ) -> None:
        self.cls = request_class
        self.salt = salt  # mixed into unique prefixes: another run's prompts never share one
        key = [seed] if isinstance(seed, int) else list(seed)
        self.tokenizer = tokenizer or BuiltinTokenizer()
        self._pool = ""  # builtin tokenizer: prompts are slices of one pre-generated word pool
        if isinstance(self.tokenizer, BuiltinTokenizer):
            ids = np.random.default_rng([*key, 0]).integers(0, len(VOCABULARY), size=_POOL_WORDS)
            self._pool = " ".join(VOCABULARY[i] for i in ids.tolist()) + " "
        self._pools = [self._pool]  # the pool, then twice, four times… it, for prompts longer than it (kept)
        c = request_class
        self._key = key
        self.steps = [PromptFactory(step, [*key, 8, k], self.tokenizer) for k, step in enumerate(c.flow or ())]
        prepare_kind(c)
        # one system prompt, or ``system_prompts`` of them (request i has i mod n); the first keeps its old seed
        self.system_prompts = [
            self.tokenizer.synthesize(c.system_prompt_tokens, np.random.default_rng([*key, 2] + ([j] if j else [])))
            for j in range(c.system_prompts)
        ] if c.system_prompt_tokens else [""]  # fmt: skip
        self.system_prompt = self.system_prompts[0]
        self._system_tokens = self.tokenizer.count(self.system_prompt) if self.system_prompt else 0
        # the server's template tokens around a single request's text
        self._around = self.tokenizer.template_tokens(c.request_kind, system=bool(self.system_prompt))
        shared = c.shared_prefix
        self.shared_prefix = (
            self.tokenizer.synthesize(shared.tokens, np.random.default_rng([*key, 3])) if shared else ""
        )

        self.dataset = c.dataset.read() if c.dataset is not None else None
        rows = len(self.dataset) if self.dataset is not None else 1

        def draw(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
            prompt = np.maximum(np.rint(c.prompt_tokens.sample(rng, _BLOCK)), 1).astype(np.int64)
            output = np.maximum(np.rint(c.output_tokens.sample(rng, _BLOCK)), 1).astype(np.int64)
            with_prefix = rng.random(_BLOCK) < (shared.fraction if shared else 0.0)
            return prompt, output, with_prefix, rng.integers(0, rows, size=_BLOCK)

        self._draws = _Blocks([*key, 1], draw)
        # specs without text (``spec(text=False)``) by their draw: only lengths tell them apart
        self._lean_ok = c.session is None and c.agent is None and c.tools is None and not has_payload(c.request_kind)
        self._lean: dict[tuple, RequestSpec] = {}

    def spec(self, index: int, text: bool = True, media: bool = True) -> RequestSpec:
        """Request ``index``. ``text=False``: its prompt text is left empty when nothing but its
        length depends on it (no dataset, session or payload kind) — for callers that only count
        tokens, as the simulator does without a response or prefix cache; every other field is the same.
        ``media=False`` sizes its images and audio without making them (``surgelab preview``).
        """
        draw = self._draws[index]
        lean = not text and self.dataset is None and self._lean_ok
        group = index % len(self.system_prompts)
        if lean:  # the spec is its lengths alone: equal draws give equal specs, shared (they are frozen)
            spec = self._lean.get((*draw[:3], group))
            if spec is not None:
                return spec
        n, max_tokens, with_prefix, row = draw
        c = self.cls
        kind = c.request_kind
        around = self._around
        if self.dataset is None:
            n = max(n - around, 1)  # the server's template tokens are part of the length asked for
            prompt = "" if lean else self.text(index, n)
        else:
            prompt, n, max_tokens = self._from_dataset(index, row, n, max_tokens)
        tokens = n + around + self._system_tokens
        if with_prefix:
            if not lean:
                prompt = self.shared_prefix + ("" if prompt.startswith(" ") else " ") + prompt
            tokens += c.shared_prefix.tokens  # type: ignore[union-attr]
        spec = RequestSpec(
            prompt=prompt,
            prompt_tokens=tokens,
            max_tokens=max_tokens,
            system_prompt=self.system_prompts[group],
            request_class=c.name,
            tier=c.tier,
            endpoint=c.endpoint,
            extra=c.sampling,
            keep_text=c.session is not None or c.agent is not None,
            kind=kind,
            tools=tuple(c.tools.names) if c.tools is not None and c.agent is None else (),
        )
        if has_payload(kind):
            return build_kind(self, index, spec, media)
        if lean:
            if len(self._lean) >= _LEAN_SPECS:
                self._lean.clear()
            self._lean[(*draw[:3], group)] = spec
        return spec

    def synthetic(self, index: int) -> Synthetic | None:
        """How request ``index``'s prompt is made, where it is the built-in pool's words behind a unique
        prefix (and the shared prefix, if drawn) and nothing else: no dataset, session or payload kind."""
        c = self.cls
        if not (self._pool and c.unique_prefix and self.dataset is None and self._lean_ok):
            return None
        n, _, with_prefix, _ = self._draws[index]
        return Synthetic(self, index, self.shared_prefix if with_prefix else "", bool(with_prefix), max(n - self._around, 1))

    @property
    def key(self) -> list[int]:
        return self._key

    @property
    def system_tokens(self) -> int:
        return self._system_tokens

    def _from_dataset(self, index: int, row: int, n: int, max_tokens: int) -> tuple[str, int, int]:
        """A dataset row's prompt: its own text (behind the unique prefix), or text of its recorded length."""
        data = self.dataset
        assert data is not None and self.cls.dataset is not None
        if self.cls.dataset.order == "sequential":
            row = index % len(data)
        recorded = int(data.output_tokens[row])
        max_tokens = recorded if recorded >= 1 else max_tokens
        if data.texts is None:
            n = int(data.prompt_tokens[row])
            return self.text(index, n), n, max_tokens
        text = data.texts[row]
        if self.cls.unique_prefix:
            head = self.text(index, PREFIX_WIDTH)
            text = head + ("" if text[:1].isspace() else " ") + text
        return text, self.tokenizer.count(text), max_tokens

    def conversation(self, index: int) -> Conversation | None:
        """How the session started by request ``index`` goes on (None for a single request)."""
        session = self.cls.session
        if session is None:
            return None
        rng = np.random.default_rng([*self._key, 5, index])
        turns = min(max(int(np.rint(session.turns.sample(rng, 1)[0])), 1), MAX_TURNS)
        more = turns - 1
        prompts = np.maximum(np.rint(self.cls.prompt_tokens.sample(rng, more)), 1).astype(int)
        outputs = np.maximum(np.rint(self.cls.output_tokens.sample(rng, more)), 1).astype(int)
        return Conversation(
            turns=turns,
            think_s=tuple(float(x) for x in session.think_time.sample(rng, more)),
            prompt_tokens=tuple(int(x) for x in prompts),
            output_tokens=tuple(int(x) for x in outputs),
            previous_response_id=session.previous_response_id,
        )

    def next_turn(
        self, index: int, first: RequestSpec, plan: Conversation, turn: int, history: tuple[tuple[str, str], ...]
    ) -> RequestSpec:
        """Turn ``turn`` (counted from 1) of session ``index``: a new message on top of the whole history."""
        n = plan.prompt_tokens[turn - 2]
        prompt = self.text(index + turn * 1_000_003, n)
        return replace(
            first, prompt=prompt, prompt_tokens=self.context_tokens(n, history), max_tokens=plan.output_tokens[turn - 2],
            history=history,
        )  # fmt: skip

    def context_tokens(self, new_tokens: int, history: tuple[tuple[str, str], ...]) -> int:
        """Prompt tokens of a request that sends ``history`` and a new message of ``new_tokens``."""
        count = self.tokenizer.count
        history_tokens = sum(count(u.strip()) + count(a.strip()) for u, a in history)
        around = self.tokenizer.template_tokens(self.cls.request_kind, bool(self.system_prompt), len(history))
        return self._system_tokens + history_tokens + new_tokens + around

    def _number(self, index: int) -> int:
        """The number a prompt's unique prefix spells: its index, shifted by the run's salt."""
        return (index + 1 + self.salt * 1_000_003) % (1 << 36)

    def text(self, index: int, n_tokens: int) -> str:
        """Prompt of exactly ``n_tokens`` tokens for request ``index``."""
        if not self._pool:  # a real model's tokenizer: synthesise and check
            prefix = self.tokenizer.unique_prefix(self._number(index), PREFIX_WIDTH) if self.cls.unique_prefix else ()
            return self.tokenizer.synthesize(n_tokens, np.random.default_rng([*self._key, 4, index]), prefix)
        head = [VOCABULARY[d] for d in self._head(index, n_tokens)]
        rest = n_tokens - len(head)
        body = ""
        if rest > 0:
            pool, start = self._body(index, rest)
            body = pool[start : start + rest * 5 - 1]
        return " ".join([*head, body]) if body else " ".join(head)

    def words(self, index: int, n_tokens: int, count: int) -> list[str]:
        """The first ``count`` words of ``text(index, n_tokens)`` (built-in pool), without making the rest."""
        head = self._head(index, n_tokens)
        words = [VOCABULARY[d] for d in head[:count]]
        more = min(count, n_tokens) - len(words)
        if more > 0:
            pool, start = self._body(index, n_tokens - len(head))
            words.extend(pool[start : start + more * 5 - 1].split(" "))
        return words

    def _head(self, index: int, n_tokens: int) -> list[int]:
        """The word ids that start prompt ``index`` (its unique prefix, cut to ``n_tokens``), with the built-in pool."""
        if not self.cls.unique_prefix:
            return []
        return self.tokenizer.unique_prefix(self._number(index), PREFIX_WIDTH)[:n_tokens]

    def _body(self, index: int, words: int) -> tuple[str, int]:
        """The pool text that ``words`` pool words of prompt ``index`` are cut from, and where they start."""
        pools, k = self._pools, 0
        while words * 5 > len(pools[k]):  # the pool doubled until the prompt fits, each size made once
            k += 1
            if k == len(pools):
                pools.append(pools[-1] + pools[-1])
        pool = pools[k]
        start = ((index * 7919) % _POOL_WORDS) * 5
        if start + words * 5 > len(pool):
            start = 0
        return pool, start


class WorkloadSampler:
    """Specs for a weighted mix: the class of request ``i`` is drawn from the weights."""

    def __init__(
        self, workload: Workload, seed: int, stream: int = 0, tokenizer: Tokenizer | None = None, salt: int = 0
    ) -> None:
        tokenizer = tokenizer or BuiltinTokenizer()
        self.classes = workload.classes
        self.factories = [PromptFactory(c, [seed, stream, k], tokenizer, salt) for k, c in enumerate(self.classes)]
        weights = np.array([c.weight for c in self.classes], dtype=float)
        cumulative = self._cumulative = np.cumsum(weights / weights.sum())
        n = len(self.classes)
        self._choice = _Blocks(
            [seed, stream, 99],
            lambda rng: (np.minimum(np.searchsorted(cumulative, rng.random(_BLOCK), side="right"), n - 1),),
        )
        self.tokenizer = tokenizer

    def synthetic(self, index: int) -> Synthetic | None:
        return self.factory(index).synthetic(index)

    def factory(self, index: int) -> PromptFactory:
        (k,) = self._choice[index] if len(self.factories) > 1 else (0,)
        return self.factories[int(k)]

    def spec(self, index: int, text: bool = True, media: bool = True) -> RequestSpec:
        return self.factory(index).spec(index, text, media)

    def profile(self, user_key: Sequence[int]) -> PromptFactory:
        """The class a closed-loop user keeps for the whole run (``workload.assign: user``)."""
        draw = np.random.default_rng(list(user_key)).random()
        k = min(int(np.searchsorted(self._cumulative, draw, side="right")), len(self.factories) - 1)
        return self.factories[k]

    def conversation(self, index: int) -> Conversation | None:
        return self.factory(index).conversation(index)

    def next_turn(
        self, index: int, first: RequestSpec, plan: Conversation, turn: int, history: tuple[tuple[str, str], ...]
    ) -> RequestSpec:
        return self.factory(index).next_turn(index, first, plan, turn, history)
