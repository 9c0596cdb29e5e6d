"""Which tokenizer a scenario counts prompt lengths with."""

from __future__ import annotations

import functools

from surgelab.scenario.calibration import TokenizerCalibration
from surgelab.tokenizer import BuiltinTokenizer, Tokenizer
from surgelab.workload.hf_tokenizer import HFTokenizer
from surgelab.workload.server_tokenizer import ServerTokenizer

__all__ = ["load_tokenizer"]


def load_tokenizer(spec: str, calibration: TokenizerCalibration | None = None) -> Tokenizer:
    """The target's own (learned before the run), the built-in one, or a Hugging Face ``tokenizer.json``.

    ``auto`` and ``server`` are the built-in tokenizer until the runner has learned the
    target's (previews and simulations never contact a target).
    """
    if calibration is not None:
        return ServerTokenizer(calibration)
    if spec in ("builtin", "auto", "server"):
        return BuiltinTokenizer()
    return _load_file(spec)


@functools.lru_cache(maxsize=4)
def _load_file(path: str) -> Tokenizer:
    return HFTokenizer(path)
