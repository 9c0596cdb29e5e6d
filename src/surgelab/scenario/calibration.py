"""What surgelab learned of the target's own tokenizer before a run, kept in the resolved scenario.

Filled in by the runner (``tokenizer: auto`` or ``server``) from the target's ``/tokenize``,
never written by hand: it is saved in the run's ``scenario.yaml`` so that a run's prompts can
be told, and resent, exactly.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["TemplateTokens", "TokenizerCalibration"]


class TemplateTokens(BaseModel):
    """Tokens the server adds around a request's text (BOS, chat roles, the generation prompt)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    completion: int = Field(0, ge=0, description="Around a completions prompt (usually the BOS token).")
    chat: int = Field(0, ge=0, description="Around a chat of one user message, the generation prompt included.")
    system: int = Field(0, ge=0, description="More when a system message comes first.")
    turn: int = Field(0, ge=0, description="More for each earlier user/assistant pair.")

    def around(self, chat: bool, system: bool = False, turns: int = 0) -> int:
        if not chat:
            return self.completion
        return self.chat + (self.system if system else 0) + self.turn * turns


class TokenizerCalibration(BaseModel):
    """The target's tokenizer as measured through its API: which words it counts as one token."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Field(description="Where it was learned, e.g. 'vllm /tokenize at http://127.0.0.1:8000'.")
    words: tuple[str, ...] = Field(min_length=16, description="Words the server counts as exactly one token after a space.")
    tokens_per_builtin_token: float = Field(
        gt=0, description="The server's tokens per built-in token over all candidate words: for other text."
    )
    template: TemplateTokens = Field(TemplateTokens(), description="Tokens the server adds around the text.")
    template_measured: bool = Field(True, description="False when the server could not say (its count is then 0).")
    endpoint: str = Field("chat", description="The target's endpoint when it was learned: chat or completions.")
