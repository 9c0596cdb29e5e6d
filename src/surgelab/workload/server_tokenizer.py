"""The target's own tokenizer, learned through its ``/tokenize`` before the run.

Asked for 128-token prompts, a real server counts the built-in tokenizer's pseudo-words as
two or three tokens each and adds its chat template: 348 tokens arrived at vLLM. So before a
run the candidate words are sent to the server's tokenizer once (``client/tokenize.py``),
and each word's cost is read off the pieces it returns. Prompts are then built only from
words the server counts as exactly one token after a space (its pre-tokenizer splits at
spaces, so costs add up), with the template's own tokens taken off the requested length:
``--prompt-tokens 128`` is 128 tokens as the server counts them.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from surgelab.kinds import KINDS
from surgelab.scenario.calibration import TemplateTokens, TokenizerCalibration
from surgelab.tokenizer import VOCABULARY, BuiltinTokenizer, Tokenizer

__all__ = ["CANDIDATES", "ServerTokenizer", "word_costs", "calibration_from_costs", "agrees_with_builtin"]

CANDIDATES: tuple[str, ...] = VOCABULARY + tuple(c + v for c, v in itertools.product("bdfgklmnprstvz", "aeiou"))
"""Words tried against the server: the built-in pseudo-words, then two-letter syllables."""

_MIN_WORDS = 16
_MARKS = str.maketrans({"Ġ": " ", "▁": " ", "Ċ": "\n"})  # byte-level BPE and SentencePiece spellings


def _piece_text(piece: str | Sequence[int]) -> str:
    if isinstance(piece, str):
        return piece.translate(_MARKS)
    return bytes(piece).decode("latin-1")  # llama.cpp sends a piece that is not valid UTF-8 as its bytes


def word_costs(words: Sequence[str], pieces: Sequence[str | Sequence[int]]) -> list[int | None] | None:
    """Each word's token count in the server's tokens of ``" w1 w2 …"``, from the tokens' text.

    None for a word a token crosses (the costs would not add up), and None overall when the
    pieces do not spell the text (then nothing can be read from them).
    """
    text = "".join(" " + w for w in words)
    spelled = "".join(_piece_text(p) for p in pieces)
    if spelled == text:
        shift = 0
    elif spelled == text[1:]:  # the leading space was dropped
        shift = 1
    elif spelled[1:] == text:  # SentencePiece's dummy prefix doubled it
        shift = -1
    else:
        return None
    starts = np.cumsum([0] + [len(_piece_text(p)) for p in pieces]) + shift
    ends = starts[1:]
    starts = starts[:-1]
    costs: list[int | None] = []
    begin = 0
    for w in words:
        end = begin + 1 + len(w)
        inside = (starts >= begin) & (starts < end)
        crossing = np.any((starts < end) & (ends > end)) or np.any((starts < begin) & (ends > begin))
        costs.append(None if crossing else int(inside.sum()))
        begin = end
    return costs


def calibration_from_costs(
    words: Sequence[str], costs: Sequence[int | None], template: TemplateTokens, source: str, measured: bool, endpoint: str
) -> TokenizerCalibration | None:
    """The calibration, or None when too few words are a single token for this server."""
    single = tuple(w for w, c in zip(words, costs) if c == 1)
    known = [(w, c) for w, c in zip(words, costs) if c is not None]
    if len(single) < _MIN_WORDS or not known:
        return None
    builtin = BuiltinTokenizer()
    ratio = sum(c for _, c in known) / sum(builtin.count(" " + w) for w, _ in known)
    return TokenizerCalibration(
        source=source, words=single, tokens_per_builtin_token=round(ratio, 4), template=template,
        template_measured=measured, endpoint=endpoint,
    )  # fmt: skip


def agrees_with_builtin(calibration: TokenizerCalibration, costs: Sequence[int | None]) -> bool:
    """The server counts as the built-in tokenizer does: every pseudo-word one token, no template."""
    return all(c == 1 for c in costs[: len(VOCABULARY)]) and calibration.template == TemplateTokens()


class ServerTokenizer(Tokenizer):
    """Prompts of exact length as the target counts them; an estimate for other text (answers, datasets)."""

    name = "server"

    def __init__(self, calibration: TokenizerCalibration) -> None:
        self.calibration = calibration
        self.words = [" " + w for w in calibration.words]
        self._single = frozenset(calibration.words)
        self._builtin = BuiltinTokenizer()

    def count(self, text: str) -> int:
        total = 0.0
        ratio = self.calibration.tokens_per_builtin_token
        for word in text.split():
            total += 1 if word in self._single else self._builtin.count(" " + word) * ratio
        return round(total)

    def synthesize(self, n_tokens: int, rng: np.random.Generator, prefix: Sequence[int] = ()) -> str:
        if n_tokens <= 0:
            return ""
        words = self.words
        picks = [words[i % len(words)] for i in prefix][:n_tokens]
        picks += [words[i] for i in rng.integers(0, len(words), size=n_tokens - len(picks)).tolist()]
        return "".join(picks)

    def unique_prefix(self, number: int, width: int = 3) -> list[int]:
        base, digits = len(self.words), []
        for _ in range(width):
            number, digit = divmod(number, base)
            digits.append(digit)
        return digits

    def template_tokens(self, kind: str | None, system: bool = False, turns: int = 0) -> int:
        spec = KINDS.get(kind or self.calibration.endpoint)
        template = spec.template if spec is not None else None  # responses and messages: the chat template
        if template is None:
            return 0
        return self.calibration.template.around(template == "chat", system, turns)
