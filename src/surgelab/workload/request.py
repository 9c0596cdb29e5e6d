"""The request spec: everything a client needs to send one request, decided before sending."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RequestSpec"]


@dataclass(frozen=True, slots=True)
class RequestSpec:
    prompt: str
    prompt_tokens: int  # as counted by the workload's tokenizer
    max_tokens: int
    system_prompt: str = ""
