"""How fast long prompts are built: milliseconds per request spec, for each long-context preset and 500k tokens.

A prompt is a slice of one pre-generated word pool behind its unique prefix (``workload/prompts.py``),
so its cost is copying its characters, not tokenising or joining words. Timed twice: with the built-in
tokenizer, and with a tokenizer learned from a server's ``/tokenize`` (``tokenizer: auto`` against
vLLM: words drawn per prompt), the median of ``--repeat`` specs each (the first, which builds the
pool, apart).

    python benchmarks/long_prompts.py
"""

from __future__ import annotations

import argparse
import statistics
import time

from surgelab.scenario.calibration import TokenizerCalibration
from surgelab.scenario.model import Workload
from surgelab.scenario.presets import PRESET_LENGTHS
from surgelab.tokenizer import VOCABULARY
from surgelab.workload.prompts import PromptFactory
from surgelab.workload.server_tokenizer import ServerTokenizer


def _median_ms(factory: PromptFactory, repeat: int) -> tuple[float, float]:
    started = time.perf_counter()
    factory.spec(0)
    first = (time.perf_counter() - started) * 1e3
    times = []
    for i in range(1, repeat + 1):
        started = time.perf_counter()
        factory.spec(i)
        times.append((time.perf_counter() - started) * 1e3)
    return first, statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    server = ServerTokenizer(
        TokenizerCalibration(source="bench", words=tuple(VOCABULARY[:85]), tokens_per_builtin_token=1.3)
    )
    rows = [(name, {"preset": name}) for name in PRESET_LENGTHS] + [
        ("500k", {"prompt_tokens": 500_000, "output_tokens": 1})
    ]
    print("| prompt | builtin: first, median ms | server tokenizer: first, median ms |")
    print("|---|---|---|")
    for name, workload in rows:
        cls = Workload.model_validate(workload).classes[0]
        cells = [_median_ms(PromptFactory(cls, 0, tokenizer), args.repeat) for tokenizer in (None, server)]
        print(f"| {name} | " + " | ".join(f"{first:.1f}, {median:.2f}" for first, median in cells) + " |")


if __name__ == "__main__":
    main()
