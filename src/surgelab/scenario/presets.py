"""Named workload presets: a class's lengths by name, for the long-context tests every peer now runs.

``preset: long-100k`` is ``prompt_tokens: 100000, output_tokens: 128``: a very long prompt and a
short answer, so the run measures prefill (TTFT, the prefix cache, chunked prefill) rather than
decode. A preset only fills the lengths a class does not give itself; the rest of the class
(unique prefixes, system prompts, shared prefixes, sessions) applies as usual, so two requests of a
preset share no prefix unless one is asked for. ``k`` is a thousand tokens, so ``long-32k`` fits a
32,768-token model with room for its answer.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

__all__ = ["Preset", "PRESETS", "PRESET_LENGTHS", "LENGTHS", "with_preset"]

Preset = Literal["long-8k", "long-32k", "long-100k", "long-200k"]
PRESETS: tuple[str, ...] = get_args(Preset)
_SHORT_OUT = 128
PRESET_LENGTHS: dict[str, dict[str, int]] = {
    name: {"prompt_tokens": int(name.removeprefix("long-").removesuffix("k")) * 1000, "output_tokens": _SHORT_OUT}
    for name in PRESETS
}
LENGTHS = tuple(PRESET_LENGTHS[PRESETS[0]])
"""The fields a preset sets."""


def with_preset(data: Any) -> Any:
    """A class's raw fields with its preset's lengths where the class gives none."""
    if not isinstance(data, dict) or not isinstance(data.get("preset"), str) or data["preset"] not in PRESET_LENGTHS:
        return data  # no preset, or one the field's own validation names as wrong (a list, a number, a typo)
    return {**PRESET_LENGTHS[data["preset"]], **data}
