"""A transformer's shape, read from its Hugging Face ``config.json``: what the physics needs to price it.

The engine model prices a step by the bytes it streams and the FLOPs it computes, so it needs
the model's parameter counts split the way a forward pass touches them:

- the *body* (attention and MLP weights of every layer): read once per step, computed per token;
- the *experts* of a mixture-of-experts model: in memory all of them, computed only for the
  ``experts_per_token`` each token is routed to, and read per step only for the experts that
  the step's tokens touch;
- the *embeddings*: the input table is only looked up (a row per token, never streamed), the
  output head (``lm_head``) is streamed every step (unless tied to the input table, in which
  case the one matrix is streamed as the head);
- the KV cache per token (grouped-query attention shares KV heads; multi-head latent attention
  keeps one compressed latent per layer).

Counts follow the layer shapes of the config, not a published "parameter count": every figure
below can be checked against the config it came from.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Architecture", "ArchitectureError", "read_config_json"]

_NOT_GATED = frozenset({"gpt2", "gpt_neox", "opt", "falcon", "bloom", "gpt_bigcode", "starcoder2", "phi", "mpt", "gptj"})
"""Model types whose MLP is two matrices (up, down) instead of a gated three (gate, up, down)."""


class ArchitectureError(ValueError):
    """A config that cannot describe a decoder-only transformer; the message is one line."""


@dataclass(frozen=True)
class Architecture:
    """The shape of a decoder-only transformer (dense or mixture-of-experts)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    """Dense MLP width (and, for Mixtral-style models, each expert's)."""
    vocab: int
    tied_embeddings: bool = False
    gated_mlp: bool = True
    experts: int = 0
    """Routed experts per MoE layer (0: a dense model)."""
    experts_per_token: int = 0
    expert_intermediate: int = 0
    shared_intermediate: int = 0
    """Width of the always-active shared expert(s) of an MoE layer (0: none)."""
    moe_layers: int = 0
    """Layers whose MLP is a mixture of experts; the others are dense."""
    kv_lora_rank: int = 0
    """Multi-head latent attention (DeepSeek): the compressed KV width per layer; 0 for other attention."""
    q_lora_rank: int = 0
    rope_head_dim: int = 0
    """MLA: the rotary part of a query/key head, kept beside the latent in the KV cache."""
    v_head_dim: int = 0
    max_position_embeddings: int = 0
    dtype: str = "bf16"
    """The checkpoint's weights as stored: ``bf16``, ``fp16``, ``fp8`` (a quantised checkpoint) …"""
    source: str = ""

    # -- counts ---------------------------------------------------------------------------

    @property
    def attention_type(self) -> str:
        """``MLA`` (latent), ``MHA`` (a KV head per query head) or ``GQA`` (fewer KV heads)."""
        if self.kv_lora_rank:
            return "MLA"
        return "MHA" if self.kv_heads == self.heads else "GQA"

    @property
    def is_moe(self) -> bool:
        return self.experts > 0 and self.moe_layers > 0

    @property
    def attention_params(self) -> int:
        """Attention weights of one layer (projections only; norms and biases are negligible)."""
        h, d, heads = self.hidden, self.head_dim, self.heads
        if self.kv_lora_rank:  # q (through its own latent when q_lora_rank), kv_a, kv_b, o
            rank, rope, v = self.kv_lora_rank, self.rope_head_dim, self.v_head_dim or d
            q = h * self.q_lora_rank + self.q_lora_rank * heads * d if self.q_lora_rank else h * heads * d
            return q + h * (rank + rope) + rank * heads * (d - rope + v) + heads * v * h
        return h * self.heads * d + 2 * h * self.kv_heads * d + self.heads * d * h

    def _mlp(self, width: int) -> int:
        return (3 if self.gated_mlp else 2) * self.hidden * width

    @property
    def expert_params(self) -> int:
        """One routed expert of one MoE layer."""
        return self._mlp(self.expert_intermediate) if self.is_moe else 0

    @property
    def dense_params(self) -> int:
        """Body weights every token runs through: attention everywhere, dense MLPs, shared experts, routers."""
        moe = self.moe_layers if self.is_moe else 0
        dense_mlp = (self.layers - moe) * self._mlp(self.intermediate)
        shared = moe * (self._mlp(self.shared_intermediate) + self.hidden * self.experts)
        return self.layers * self.attention_params + dense_mlp + shared

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def head_params(self) -> int:
        """The output head: the input table again when tied."""
        return self.vocab * self.hidden

    @property
    def total_params(self) -> int:
        """Every weight held in memory."""
        experts = self.moe_layers * self.experts * self.expert_params
        return self.dense_params + experts + self.embedding_params + (0 if self.tied_embeddings else self.head_params)

    @property
    def active_params(self) -> int:
        """Weights one token's forward pass multiplies (body, its experts, the head)."""
        routed = self.moe_layers * self.experts_per_token * self.expert_params
        return self.dense_params + routed + self.head_params

    @property
    def body_flops_per_token(self) -> int:
        """Multiply-adds × 2 of one token through the body (the head is computed only for sampled tokens)."""
        return 2 * (self.dense_params + self.moe_layers * self.experts_per_token * self.expert_params)

    @property
    def attention_flops_per_pair(self) -> int:
        """FLOPs of one (query, key) pair over all layers: the QK dot product and the weighted V sum."""
        v = self.v_head_dim or self.head_dim
        return 2 * self.layers * self.heads * (self.head_dim + v)

    def kv_elements_per_token(self) -> int:
        """KV-cache elements one token stores over all layers."""
        if self.kv_lora_rank:
            return self.layers * (self.kv_lora_rank + self.rope_head_dim)
        return 2 * self.layers * self.kv_heads * self.head_dim

    def expected_experts(self, tokens: float) -> float:
        """Distinct experts of one MoE layer that ``tokens`` routed tokens touch, routing uniform."""
        if not self.is_moe or tokens <= 0:
            return 0.0
        miss = 1 - self.experts_per_token / self.experts
        return self.experts * (1 - miss**tokens)

    def describe(self) -> str:
        kind = f"MoE {self.experts}×top-{self.experts_per_token}" if self.is_moe else "dense"
        return (
            f"{self.name}: {self.total_params / 1e9:.1f} B parameters ({self.active_params / 1e9:.1f} B active), {kind}, "
            f"{self.layers} layers, {self.attention_type} {self.heads}/{self.kv_heads or self.heads} heads"
        )

    @classmethod
    def dense(cls, name: str, params: float, layers: int, kv_heads: int, head_dim: int) -> Architecture:
        """A dense model known only by its totals (``surgelab memory --params …``): a head per KV head, no
        vocabulary, and the MLP as wide as makes ``params`` — its memory and KV exact, its FLOPs 2 per weight."""
        hidden = kv_heads * head_dim
        per_layer = params / layers - 4 * hidden * hidden
        if per_layer <= 0:
            raise ArchitectureError(f"{params:g} parameters cannot fill {layers} layers of width {hidden}")
        return cls(name, layers, hidden, kv_heads, kv_heads, head_dim, max(round(per_layer / (3 * hidden)), 1), 0)

    # -- reading ----------------------------------------------------------------------------

    @classmethod
    def from_config(cls, config: Mapping[str, Any], name: str = "", source: str = "") -> Architecture:
        """From a Hugging Face ``config.json`` (a multimodal model's ``text_config`` is its language model)."""
        text = config.get("text_config") if isinstance(config.get("text_config"), Mapping) else None
        cfg: Mapping[str, Any] = {**config, **text} if text else config

        def need(*keys: str) -> int:
            for key in keys:
                value = cfg.get(key)
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    return value
            raise ArchitectureError(f"config has no positive integer {' or '.join(repr(k) for k in keys)}")

        def opt(*keys: str) -> int:
            for key in keys:
                value = cfg.get(key)
                if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                    return value
            return 0

        model_type = str(cfg.get("model_type") or config.get("model_type") or "")
        layers, hidden, heads = need("num_hidden_layers", "n_layer", "num_layers"), need("hidden_size", "n_embd"), need(
            "num_attention_heads", "n_head"
        )
        kv_heads = opt("num_key_value_heads", "num_kv_heads") or heads
        head_dim = opt("head_dim") or hidden // heads
        if opt("kv_lora_rank"):  # MLA: a query/key head is its no-rope part plus its rope part
            head_dim = opt("qk_nope_head_dim") + opt("qk_rope_head_dim") or head_dim
        experts = opt("num_local_experts", "num_experts", "n_routed_experts")
        per_token = opt("num_experts_per_tok", "moe_top_k") if experts else 0
        moe_layers = 0
        expert_width = shared_width = 0
        intermediate = opt("intermediate_size", "n_inner", "ffn_dim") or 4 * hidden
        if experts and per_token:
            moe_layers = _moe_layers(cfg, model_type, layers)
            if model_type.startswith("llama4"):
                expert_width = shared_width = intermediate  # one shared expert as wide as a routed one
                intermediate = opt("intermediate_size_mlp") or intermediate
            else:
                expert_width = opt("moe_intermediate_size") or intermediate
                shared_width = opt("shared_expert_intermediate_size") or opt("n_shared_experts") * expert_width
        return cls(
            name=name or str(config.get("_name_or_path") or model_type or "model"),
            layers=layers,
            hidden=hidden,
            heads=heads,
            kv_heads=kv_heads,
            head_dim=head_dim,
            intermediate=intermediate,
            vocab=need("vocab_size"),
            tied_embeddings=bool(cfg.get("tie_word_embeddings", config.get("tie_word_embeddings", False))),
            gated_mlp=model_type not in _NOT_GATED,
            experts=experts if moe_layers else 0,
            experts_per_token=per_token if moe_layers else 0,
            expert_intermediate=expert_width,
            shared_intermediate=shared_width,
            moe_layers=moe_layers,
            kv_lora_rank=opt("kv_lora_rank"),
            q_lora_rank=opt("q_lora_rank"),
            rope_head_dim=opt("qk_rope_head_dim") if opt("kv_lora_rank") else 0,
            v_head_dim=opt("v_head_dim"),
            max_position_embeddings=opt("max_position_embeddings", "n_positions"),
            dtype=_checkpoint_dtype(config, cfg),
            source=source,
        )


def _moe_layers(cfg: Mapping[str, Any], model_type: str, layers: int) -> int:
    """How many layers are MoE, from the config's interleaving keys (every layer by default)."""
    step = cfg.get("interleave_moe_layer_step") or cfg.get("decoder_sparse_step") or cfg.get("moe_layer_freq") or 1
    first_dense = cfg.get("first_k_dense_replace") or 0
    dense_only = set(cfg.get("mlp_only_layers") or [])
    if not isinstance(step, int) or step < 1:
        step = 1
    return sum(
        1 for i in range(layers) if i >= first_dense and i not in dense_only and (i + 1) % step == 0
    )


def _checkpoint_dtype(config: Mapping[str, Any], cfg: Mapping[str, Any]) -> str:
    quant = config.get("quantization_config") or cfg.get("quantization_config")
    if isinstance(quant, Mapping):
        text = json.dumps(quant).lower()
        if "fp8" in text or "float8" in text or "float-quantized" in text:
            return "fp8"
        bits = quant.get("bits") or quant.get("w_bit")
        if bits == 4 or "int4" in text or "awq" in text or "gptq" in text:
            return "int4"
        if bits == 8:
            return "int8"
    dtype = str(cfg.get("torch_dtype") or config.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    return {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}.get(dtype, "bf16")


def read_config_json(path: Path, name: str = "") -> Architecture:
    """An ``Architecture`` from a ``config.json`` file; ArchitectureError (one line) on any problem."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ArchitectureError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ArchitectureError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, Mapping):
        raise ArchitectureError(f"{path} must hold a JSON object (a Hugging Face config.json)")
    try:
        return Architecture.from_config(data, name=name or path.parent.name or path.stem, source=str(path))
    except ArchitectureError as exc:
        raise ArchitectureError(f"{path}: {exc}") from None
