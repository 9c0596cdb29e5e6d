"""A real model's tokenizer, read offline from a Hugging Face ``tokenizer.json``.

With it, prompts have exactly the sampled number of tokens *for that model*, as the server
will count them (before its chat template). Text is built from vocabulary entries that are
one token on their own with a leading space, and checked by encoding; a length that comes
out wrong (a merge across words) is corrected by adding or removing words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from surgelab.tokenizer import Tokenizer

__all__ = ["HFTokenizer", "TokenizerError"]

_WORD = re.compile(r"^ [A-Za-z]{2,10}$")
_WANTED = 4096


class TokenizerError(ValueError):
    pass


class HFTokenizer(Tokenizer):
    def __init__(self, path: str | Path) -> None:
        try:
            from tokenizers import Tokenizer as _Tokenizer  # optional (extra hf): only for a tokenizer.json
        except ImportError:  # pragma: no cover - listed in the hf and test extras
            raise TokenizerError("a tokenizer file needs the 'tokenizers' package: pip install 'surgelab[hf]'") from None
        path = Path(path)
        file = path / "tokenizer.json" if path.is_dir() else path
        try:
            self._tok = _Tokenizer.from_file(str(file))
        except Exception as exc:  # the Rust library raises its own exception types
            raise TokenizerError(f"{file}: cannot load tokenizer: {exc}") from None
        self.name = str(file)
        self.words = self._single_token_words()
        if len(self.words) < 16:
            raise TokenizerError(f"{file}: too few single-token words in the vocabulary to synthesise prompts")

    def _single_token_words(self) -> list[str]:
        """Vocabulary entries that encode to exactly one token with their leading space."""
        vocab = sorted(self._tok.get_vocab().values())
        words: list[str] = []
        for token_id in vocab:
            text = self._tok.decode([token_id])
            if _WORD.match(text) and self._tok.encode(text, add_special_tokens=False).ids == [token_id]:
                words.append(text)
                if len(words) >= _WANTED:
                    break
        return words

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def synthesize(self, n_tokens: int, rng: np.random.Generator, prefix: Sequence[int] = ()) -> str:
        if n_tokens <= 0:
            return ""
        words = self.words
        picks = [words[i % len(words)] for i in prefix][:n_tokens]
        picks += [words[i] for i in rng.integers(0, len(words), size=n_tokens - len(picks))]
        text = "".join(picks)  # every word keeps its leading space: one token each
        for _ in range(8):  # merges across word boundaries are rare; fix the few that happen
            diff = self.count(text) - n_tokens
            if diff == 0:
                return text
            if diff > 0:
                text = text.rsplit(" ", diff)[0] if text.count(" ") >= diff else text
            else:
                text += "".join(words[i] for i in rng.integers(0, len(words), size=-diff))
        return text

    def unique_prefix(self, number: int, width: int = 3) -> list[int]:
        base = len(self.words)
        digits = []
        for _ in range(width):
            number, digit = divmod(number, base)
            digits.append(digit)
        return digits
