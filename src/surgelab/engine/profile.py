"""The engine's cost model as plain coefficients, and how to read them from a file.

A profile is what the engine needs to time a step and bound a batch. It is derived from
hardware physics (``hardware.py``) or written out explicitly, e.g. by ``surgelab fit``.

Step time, for a step that computes ``T`` tokens (prefilled or decoded), schedules ``s``
sequences, reads ``r`` tokens of KV cache and computes ``a`` prefill attention pairs::

    weights   = decode_base_s + expert_s · E(T)          # streamed once; E: experts the tokens touch
    linear    = max(weights, prefill_s_per_token · T)    # a roofline: bandwidth- or compute-bound
    attention = s_per_kv_token · r + prefill_s_per_pair · a
    t = step_overhead_s + step_s_per_seq · s + comm_s_per_token · T + combine(...)

``combine`` is ``split`` (a GPU forward pass, layer by layer: ``linear + attention``),
``max`` (one roofline over the whole step: ``max(weights + KV, compute + pairs)``) or
``sum`` (a CPU, whose parts take turns: everything added). ``E(T) = n·(1 − (1 − k/n)^T)``
is how many of a mixture-of-experts layer's ``num_experts`` the step's ``T`` tokens touch
when each picks ``experts_per_token`` uniformly (0 for a dense model). A prefill chunk of
``n`` tokens after ``c`` already in the cache computes ``a = n·c + n(n+1)/2`` (query, key)
pairs: attention is what makes prefill grow faster than the prompt. With the defaults
(``prefill_s_per_pair = step_s_per_seq = comm_s_per_token = expert_s = 0``, ``combine =
max``) the step time is the roofline ``overhead + max(memory, compute)``, bit for bit as
before these terms existed.

``request_overhead_s`` is no part of a step: it is the front end's time per request (HTTP,
tokenising, request set-up in the API server), paid once when a request arrives, before it
can join a step. It delays the request's admission and so its first token, but it does not
occupy the engine: the front end works concurrently with the steps. The engine itself reads
no clock, so its callers apply it (the simulator's replica, the embedded server's driver).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, asdict, dataclass, fields, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from surgelab.yamlfile import load_yaml

__all__ = ["COEFFICIENTS", "COMBINE", "EngineProfile", "ProfileError", "read_profile_file", "read_profile_mapping"]

COEFFICIENTS = (
    "prefill_s_per_token", "decode_base_s", "s_per_kv_token", "step_overhead_s", "prefill_s_per_pair", "step_s_per_seq",
    "request_overhead_s", "comm_s_per_token", "expert_s", "kv_load_s_per_block",
)  # fmt: skip
"""The step-time coefficients (seconds per unit of work), each a finite number >= 0."""
COMBINE = ("max", "sum", "split")


class ProfileError(ValueError):
    """A profile name or file that cannot be used; the message is one line for the CLI."""


@dataclass(frozen=True)
class EngineProfile:
    """Step-time coefficients and batch limits of one engine replica."""

    name: str
    prefill_s_per_token: float
    decode_base_s: float
    s_per_kv_token: float
    step_overhead_s: float
    kv_capacity_tokens: int
    max_num_seqs: int
    max_batched_tokens: int
    block_size: int = 16
    max_model_len: int = 8192
    model: str = "surgelab-model"
    """The model name the server reports."""
    description: str = ""
    kv_bytes_per_token: float | None = None
    """Bytes of KV cache one token takes (all layers), when known: what cached tokens cost in memory."""
    prefill_s_per_pair: float = 0.0
    """Seconds per (query, key) pair of prefill attention: the super-linear part of prefill."""
    step_s_per_seq: float = 0.0
    """Scheduling overhead per sequence in a step (bookkeeping, sampling, per-sequence launches)."""
    combine: str = "max"
    """How a step's parts combine: ``split`` (GPU, layer by layer), ``max`` (one roofline) or ``sum`` (CPU)."""
    request_overhead_s: float = 0.0
    """The front end's time per request before it can join a step (not engine time: concurrent with steps)."""
    comm_s_per_token: float = 0.0
    """Tensor-parallel all-reduce payload per token in the step (its latency is in ``step_overhead_s``)."""
    expert_s: float = 0.0
    """Mixture of experts: seconds to stream one routed expert of every MoE layer."""
    num_experts: int = 0
    """Mixture of experts: routed experts per MoE layer (0: dense)."""
    experts_per_token: int = 0
    """Mixture of experts: experts each token is routed to."""
    gpu: str = ""
    """The GPU the physics derived these figures for (``Deployment``); empty for coefficients given or fitted."""
    kv_cpu_blocks: int = 0
    """KV blocks an offload to host memory holds (vLLM's CPU offload; 0: none): evicted prefix blocks live on there."""
    kv_load_s_per_block: float = 0.0
    """Seconds to load one KV block back from host memory, added to the step that admits the request."""

    def validate(self) -> list[str]:
        """Every problem at once, as ``field: message`` lines."""
        errors = []
        for name in COEFFICIENTS:
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                errors.append(f"{name}: must be a finite number >= 0, got {value!r}")
        for name in (
            "kv_capacity_tokens",
            "max_num_seqs",
            "max_batched_tokens",
            "block_size",
            "max_model_len",
        ):
            value = getattr(self, name)
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
                errors.append(f"{name}: must be an integer >= 1, got {value!r}")
        kv_bytes = self.kv_bytes_per_token
        if kv_bytes is not None and not (isinstance(kv_bytes, (int, float)) and math.isfinite(kv_bytes) and kv_bytes > 0):
            errors.append(f"kv_bytes_per_token: must be a finite number > 0, got {kv_bytes!r}")
        for name in ("num_experts", "experts_per_token", "kv_cpu_blocks"):
            value = getattr(self, name)
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
                errors.append(f"{name}: must be an integer >= 0, got {value!r}")
        if not errors:
            moe = (self.expert_s > 0, self.num_experts > 0, self.experts_per_token > 0)
            if len(set(moe)) > 1 or self.experts_per_token > self.num_experts:
                errors.append(
                    "expert_s, num_experts, experts_per_token: give all three (experts_per_token <= num_experts) or none"
                )
        if self.combine not in COMBINE:
            errors.append(f"combine: must be one of {', '.join(COMBINE)}, got {self.combine!r}")
        if not errors and self.kv_capacity_tokens < self.block_size:
            errors.append("kv_capacity_tokens: must hold at least one block")
        return errors

    @property
    def kv_blocks(self) -> int:
        return self.kv_capacity_tokens // self.block_size

    @cached_property  # read once per planned run: the fields are frozen
    def roofline(self) -> bool:
        """Whether the step time is the plain ``overhead + max(memory, compute)`` (no attention, per-sequence or additive terms)."""
        return (
            self.prefill_s_per_pair == 0 and self.step_s_per_seq == 0 and self.combine == "max"
            and self.comm_s_per_token == 0 and self.expert_s == 0
        )  # fmt: skip

    def step_time(
        self, prefill_tokens: int, decode_seqs: int, kv_tokens_read: int,
        prefill_seqs: int | None = None, prefill_pairs: int | None = None,
    ) -> float:  # fmt: skip
        """Seconds for one step of the given work (see the module docstring).

        ``prefill_seqs`` and ``prefill_pairs`` default to one prompt prefilled from scratch:
        1 sequence (none without prefill) and ``p(p+1)/2`` attention pairs.
        """
        if prefill_tokens == 0 and decode_seqs == 0:
            return 0.0
        if prefill_seqs is None:
            prefill_seqs = 1 if prefill_tokens else 0
        if prefill_pairs is None:
            prefill_pairs = prefill_tokens * (prefill_tokens + 1) // 2
        first = (decode_seqs + prefill_seqs, prefill_pairs)
        return self.step_times([prefill_tokens + decode_seqs], [kv_tokens_read], first)[0]

    def step_times(
        self, tokens: Sequence[int], kv_tokens_read: Sequence[int], first: tuple[int, int] | None = None
    ) -> list[float]:
        """Seconds of steps that compute ``tokens[i]`` tokens (prefilled or decoded) and read
        ``kv_tokens_read[i]`` tokens of KV cache, each at least one token.

        Every step is pure decode (``tokens[i]`` sequences, no prefill attention) but the first,
        whose ``(sequences, attention pairs)`` are ``first`` when it prefills.
        The one place the step-time formula is written: ``step_time`` is one step, a run of
        decode steps planned by the engine is many.
        """
        overhead, base, per_kv, per_token = (
            self.step_overhead_s,
            self.decode_base_s,
            self.s_per_kv_token,
            self.prefill_s_per_token,
        )
        if not self.roofline:
            if not tokens:
                return []
            seqs, pairs = first if first is not None else (tokens[0], 0)
            head = self.price(tokens[0], kv_tokens_read[0], seqs, pairs)
            if self.combine != "split":
                price = self.price
                return [head, *[price(n, r, n, 0) for n, r in zip(tokens[1:], kv_tokens_read[1:])]]
            # split: a decode step is a part that depends on its sequences alone, plus its KV reads
            per_kv = self.s_per_kv_token
            parts: dict[int, float] = {}
            times = [head]
            for n, r in zip(tokens[1:], kv_tokens_read[1:]):
                part = parts.get(n)
                if part is None:
                    part = parts[n] = self.price(n, 0, n, 0)
                times.append(part + per_kv * r)
            return times
        if len(tokens) > 2 and per_token * max(tokens[1:]) <= base + per_kv * min(kv_tokens_read[1:]):
            # memory-bound at every step after the first (a run's planned decode steps): the same sums,
            # fewer comparisons
            n, r = tokens[0], kv_tokens_read[0]
            first_time = overhead + (m if (m := base + per_kv * r) >= (c := per_token * n) else c)
            return [first_time, *[overhead + (base + per_kv * r) for r in kv_tokens_read[1:]]]
        return [  # overhead + max(memory, compute)
            overhead + (m if (m := base + per_kv * r) >= (c := per_token * n) else c)
            for n, r in zip(tokens, kv_tokens_read)
        ]

    def price(self, tokens: float, kv_tokens_read: float, seqs: float, pairs: float) -> float:
        """Seconds of one step computing ``tokens``, reading ``kv_tokens_read`` of KV, scheduling
        ``seqs`` sequences and ``pairs`` prefill attention pairs: the formula of the module docstring.

        ``step_times`` prices steps with it (and, for a roofline profile, with the same sums inlined).
        """
        weights = self.decode_base_s
        if self.expert_s:
            weights += self.expert_s * self.experts_touched(tokens)
        kv = self.s_per_kv_token * kv_tokens_read
        linear = self.prefill_s_per_token * tokens
        pairs_s = self.prefill_s_per_pair * pairs
        if self.combine == "split":  # the KV reads added last: ``step_times`` adds them to a cached rest, bit for bit
            rest = self.step_overhead_s + self.step_s_per_seq * seqs + self.comm_s_per_token * tokens
            return rest + (weights if weights >= linear else linear) + pairs_s + kv
        if self.combine == "sum":
            both = weights + kv + linear + pairs_s
        else:
            memory, compute = weights + kv, linear + pairs_s
            both = memory if memory >= compute else compute
        return self.step_overhead_s + self.step_s_per_seq * seqs + self.comm_s_per_token * tokens + both

    def experts_touched(self, tokens: float) -> float:
        """Routed experts of one MoE layer that ``tokens`` tokens touch on average (routing uniform)."""
        n, k = self.num_experts, self.experts_per_token
        if not n or tokens <= 0:
            return 0.0
        return n * (1.0 - (1.0 - k / n) ** tokens)

    def steady_throughput(self, batch: int, prompt_tokens: int, output_tokens: int) -> float:
        """Predicted output tokens/s with ``batch`` sequences always running.

        Each request spends ``output_tokens`` steps in the batch: one that prefills its
        prompt and emits the first token, then one decode per further token. Averaged over
        a request's life, a step therefore carries ``batch`` token-producing sequences,
        ``batch × prompt ÷ output`` prefill tokens (and ``batch × prompt(prompt+1)/2 ÷ output``
        attention pairs) and ``batch × (prompt + output ÷ 2)`` tokens of KV to read.
        """
        batch = min(batch, self.max_num_seqs)
        prefill = batch * prompt_tokens / output_tokens
        kv = batch * (prompt_tokens + output_tokens / 2)
        pairs = batch * (prompt_tokens * (prompt_tokens + 1) / 2) / output_tokens
        return batch / self.price(prefill + batch, kv, batch, pairs)

    def slowed(self, factor: float) -> EngineProfile:
        """Every time ``factor`` times longer: the profile at the slow end of its measured error."""
        return replace(self, **{name: getattr(self, name) * factor for name in COEFFICIENTS})

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if data["kv_bytes_per_token"] is None:  # unknown: left out, as files written before it
            del data["kv_bytes_per_token"]
        return data

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], default_name: str = "custom") -> EngineProfile:
        """Build and validate a profile from a parsed YAML/JSON mapping."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        required = [f.name for f in fields(cls) if f.name != "name" and f.default is MISSING]
        missing = [name for name in required if name not in data]
        problems = [f"unknown key {k!r}" for k in unknown] + [f"missing key {k!r}" for k in missing]
        if problems:
            raise ProfileError("; ".join(problems))
        values = {k: v if k in _TEXT_FIELDS else _number(v) for k, v in data.items()}
        profile = cls(**{"name": default_name, **values})
        errors = profile.validate()
        if errors:
            raise ProfileError("; ".join(errors))
        return profile


def read_profile_file(path: Path) -> EngineProfile:
    """Load explicit coefficients from ``.yaml``/``.yml``/``.json``; ProfileError on any problem."""
    data = read_profile_mapping(path)
    try:
        return EngineProfile.from_mapping(data, default_name=path.stem)
    except ProfileError as exc:
        raise ProfileError(f"profile file {path}: {exc}") from None


def read_profile_mapping(path: Path) -> Mapping[str, Any]:
    """The mapping a ``.yaml``/``.yml``/``.json`` profile file holds; ProfileError (one line) otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProfileError(f"cannot read profile file {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else load_yaml(text)
    except (ValueError, yaml.YAMLError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ProfileError(f"profile file {path} is not valid {path.suffix[1:] or 'YAML'}: {first}") from None
    if not isinstance(data, Mapping):
        raise ProfileError(f"profile file {path} must contain a mapping of coefficients or a deployment")
    return data


_TEXT_FIELDS = frozenset({"name", "model", "description", "combine", "gpu"})


def _number(value: Any) -> Any:
    """Accept what YAML 1.1 leaves as text (``4.0e5``) and integral floats for counts."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return value
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value
