"""The built-in offline tokenizer, shared by the workload and the embedded server.

Real BPE vocabularies need files we cannot download at run time, yet both sides of a test
must agree on token counts exactly. This tokenizer splits text the way GPT-2's pre-tokenizer
does (an optional leading space joins the following word) and then caps pieces at a few
characters, which lands near BPE's ~4 characters per English token. It is an approximation
of a real model's counts, but an exact, deterministic one: ``count(synthesize(n)) == n``.

Synthetic text is drawn from a fixed vocabulary of short pseudo-words, each of which is
exactly one token with or without its leading space.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

import numpy as np

__all__ = ["BuiltinTokenizer", "VOCABULARY", "Tokenizer", "MAX_TOKENS"]

MAX_TOKENS = 2_000_000
"""More than any model's context: a longer prompt or output (a scenario's, a flag's, a trace row's) is a typo (1e8)."""

_PIECES = re.compile(
    r" ?[^\W\d_]{1,6}"  # words, at most six letters a piece
    r"| ?\d{1,3}"  # numbers, up to three digits a piece
    r"| ?(?:[^\w\s]|_){1,3}"  # punctuation runs
    r"|\s+(?!\S)|\s+"  # whitespace; a single space before a word belongs to the word
)


def _build_vocabulary() -> tuple[str, ...]:
    consonants = "bdfgklmnprstvz"
    vowels = "aeiou"
    syllables = [c + v for c, v in itertools.product(consonants, vowels)]  # 70
    words = [a + b for a, b in itertools.product(syllables, syllables)]  # 4900, 4 letters
    return tuple(words[:4096])


VOCABULARY: tuple[str, ...] = _build_vocabulary()
"""4,096 four-letter pseudo-words; each is one token with or without a leading space."""


class Tokenizer:
    """What the workload needs from any tokenizer: counting, and text of an exact length."""

    name: str = "abstract"

    def count(self, text: str) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def synthesize(
        self, n_tokens: int, rng: np.random.Generator, prefix: Sequence[int] = ()
    ) -> str:  # pragma: no cover
        raise NotImplementedError

    def unique_prefix(self, number: int, width: int = 3) -> list[int]:  # pragma: no cover - interface
        """Word choices spelling ``number``: the start of a prompt no other request shares."""
        raise NotImplementedError

    def template_tokens(self, kind: str | None, system: bool = False, turns: int = 0) -> int:
        """Tokens the server adds around a request's text (its chat template); 0 when not known."""
        return 0


class BuiltinTokenizer(Tokenizer):
    """Deterministic regex tokenizer; no files, no network."""

    name = "builtin"

    def count(self, text: str) -> int:
        return len(_PIECES.findall(text))

    def pieces(self, text: str) -> list[str]:
        """The tokens of ``text`` as strings (what a prefix cache hashes)."""
        return _PIECES.findall(text)

    def words(self, ids: Sequence[int] | np.ndarray) -> str:
        """Text for vocabulary ids, one token each, space separated."""
        vocab = VOCABULARY
        return " ".join(vocab[i] for i in ids)

    def synthesize(self, n_tokens: int, rng: np.random.Generator, prefix: Sequence[int] = ()) -> str:
        """Text of exactly ``n_tokens`` tokens: the ``prefix`` ids first, then random words.

        A unique prefix (for example a request number written in base 4096) keeps prompt
        caches from flattering a benchmark; a shared prefix exercises them on purpose.
        """
        if n_tokens <= 0:
            return ""
        head = list(prefix)[:n_tokens]
        tail = rng.integers(0, len(VOCABULARY), size=n_tokens - len(head))
        return self.words([*head, *tail.tolist()])

    @staticmethod
    def unique_prefix(number: int, width: int = 3) -> list[int]:
        """Vocabulary ids spelling ``number`` in base 4096 (three ids cover 68 billion)."""
        base = len(VOCABULARY)
        digits = []
        for _ in range(width):
            number, digit = divmod(number, base)
            digits.append(digit)
        return digits
