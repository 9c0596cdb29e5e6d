"""A trace or dataset as typed columns (:class:`Trace`), and what goes wrong reading one."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["RowProblem", "Trace", "TraceError"]


class TraceError(ValueError):
    """A trace file that cannot be used; the message is one line, ``FILE[:LINE]: what was expected``."""

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None) -> None:
        where = "" if path is None else f"{path}:" if line is None else f"{path}:{line}:"
        super().__init__(f"{where} {message}" if where else message)
        self.path = path
        self.line = line


@dataclass(frozen=True, slots=True)
class RowProblem:
    """A row left out of the trace: its 1-based line in the file and why."""

    line: int
    message: str


@dataclass(frozen=True, eq=False)
class Trace:
    """Requests from a trace or dataset, one array entry per row, sorted by arrival.

    ``offsets_s`` are seconds from the first request (all zero without timestamps);
    ``output_tokens`` is -1 where a prompt dataset gives no output length; ``failed`` marks
    rows the source recorded as failed (BurstGPT's zero response tokens); ``prefix_blocks``
    holds Mooncake ``hash_ids`` (one id per ``block_size`` prompt tokens); ``texts`` holds
    prompts for datasets that carry them; ``lines`` is each row's line in the source file.
    """

    offsets_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    prefix_blocks: list[tuple[int, ...]] | None = None
    texts: list[str] | None = None
    failed: np.ndarray | None = None
    source: Path | None = None
    format: str = "custom"
    skipped: list[RowProblem] = field(default_factory=list)
    has_timestamps: bool = True
    lines: np.ndarray | None = None
    block_size: int = 512

    def __post_init__(self) -> None:
        n = len(self.offsets_s)

        def column(values: Any, dtype: npt.DTypeLike) -> np.ndarray:
            array = np.array(values, dtype=dtype)  # a copy, made read-only: the trace is frozen
            array.flags.writeable = False
            return array

        set_ = object.__setattr__
        set_(self, "offsets_s", column(self.offsets_s, np.float64))
        set_(self, "prompt_tokens", column(self.prompt_tokens, np.int64))
        set_(self, "output_tokens", column(self.output_tokens, np.int64))
        set_(self, "failed", column(np.zeros(n) if self.failed is None else self.failed, bool))
        set_(self, "lines", column(np.arange(1, n + 1) if self.lines is None else self.lines, np.int64))
        for name in ("prompt_tokens", "output_tokens", "failed", "lines", "prefix_blocks", "texts"):
            values = getattr(self, name)
            if values is not None and len(values) != n:
                raise ValueError(f"Trace.{name} has {len(values)} entries, offsets_s has {n}")
        offsets = self.offsets_s
        if n and (offsets[0] != 0.0 or not np.all(np.isfinite(offsets)) or np.any(np.diff(offsets) < 0)):
            raise ValueError("Trace.offsets_s must be finite, start at 0 and never decrease")

    def __len__(self) -> int:
        return len(self.offsets_s)

    @property
    def duration_s(self) -> float:
        """Seconds from the first request to the last (0 for one row or no timestamps)."""
        return float(self.offsets_s[-1]) if len(self.offsets_s) else 0.0

    @property
    def mean_rate(self) -> float:
        """Requests per second, ``(len - 1) / duration_s`` = 1 / the mean inter-arrival time.

        NaN when the duration is 0 (one row, or no timestamps).
        """
        duration = self.duration_s
        return (len(self) - 1) / duration if duration > 0 else math.nan
